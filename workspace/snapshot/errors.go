package snapshot

import "errors"

var (
	// ErrNotFound means no snapshot has the given ID; the message names it.
	ErrNotFound = errors.New("snapshot not found")
	// ErrInvalidID means the ID is not a UUID.
	ErrInvalidID = errors.New("invalid snapshot id: want a UUID")
	// ErrTampered means a stored snapshot failed validation: a path that
	// escapes or is not canonical, a content hash or size mismatch, an
	// unknown encoding, duplicate or conflicting paths, or a malformed
	// document.
	ErrTampered = errors.New("snapshot is corrupt or has been tampered with")
	// ErrTooLarge means the workspace (or a stored snapshot) exceeds
	// Limits.MaxFiles or Limits.MaxTotalBytes, or a description is too long.
	ErrTooLarge = errors.New("snapshot too large")
	// ErrTooMany means Limits.MaxSnapshots snapshots already exist.
	ErrTooMany = errors.New("too many snapshots")
	// ErrChanged means the workspace changed while a snapshot was being
	// taken; the caller should retry with no execution running.
	ErrChanged = errors.New("workspace changed during snapshot")

	// errNoExchange means the atomic swap is impossible here (the
	// workspace is a mount point, the filesystem or OS lacks
	// RENAME_EXCHANGE), so Restore takes the journaled in-place path.
	errNoExchange = errors.New("atomic directory exchange unavailable")
)
