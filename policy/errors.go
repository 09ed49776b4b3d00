package policy

import "errors"

// ErrUnknownProfile is returned for a profile name the configuration lacks.
var ErrUnknownProfile = errors.New("unknown profile")

// ErrInvalid wraps every validation failure.
var ErrInvalid = errors.New("invalid policy")
