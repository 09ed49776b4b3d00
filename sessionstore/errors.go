package sessionstore

import "errors"

// Errors of the arguments; the outcomes of a checkpoint (absent, corrupt,
// over a quota, held elsewhere) are record's.
var (
	// ErrInvalidKey means a key is not "<owner>/<name>" with a well-formed
	// owner and name.
	ErrInvalidKey = errors.New("invalid session key")
	// ErrInvalidProfile means a profile is not one of record.Profiles.
	ErrInvalidProfile = errors.New("invalid profile")
)
