package dirlock

import "errors"

// ErrUnsupported means the filesystem of the lock file has no OFD locks:
// the Lock excludes within this process only.
var ErrUnsupported = errors.New("advisory locks unsupported on this filesystem; exclusion is within this process only")

// ErrLocked means TryLock found the lock held, in this process or another.
var ErrLocked = errors.New("the lock is held")
