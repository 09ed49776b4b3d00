package wsfs

import "errors"

var (
	// ErrEscape means the path names a location outside the workspace:
	// an absolute path, ".." above the root, or a symbolic link that
	// leads out.
	ErrEscape = errors.New("path is outside the workspace")
	// ErrNotFound means nothing exists at the path.
	ErrNotFound = errors.New("no such file in the workspace")
	// ErrNotRegular means the path exists but is not a regular file (a
	// directory, FIFO, socket or device) where one is required.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge means the content exceeds Limits.MaxFileBytes.
	ErrTooLarge = errors.New("file too large")
	// ErrInvalidPath means the path is empty, contains NUL, is too long,
	// or names the workspace root where a file is required.
	ErrInvalidPath = errors.New("invalid workspace path")
	// ErrInvalidRange means a negative offset or length.
	ErrInvalidRange = errors.New("invalid offset or length")
	// ErrLinkInPath means a directory in a path to write is a symbolic
	// link: the host never writes through a link that sandboxed code may
	// have planted, even one that stays inside the workspace.
	ErrLinkInPath = errors.New("path goes through a symbolic link")
	// ErrTooManyEntries means a listing reached Limits.MaxListEntries;
	// List returns the entries gathered so far together with it.
	ErrTooManyEntries = errors.New("too many entries to list")
)
