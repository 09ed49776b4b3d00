package egress

import "errors"

// ErrClosed is returned by Run methods after Close.
var ErrClosed = errors.New("egress run closed")

// ErrSecret means an inject value could not be read on the host; the
// request is refused, never forwarded without its header.
var ErrSecret = errors.New("reading an inject value")
