package record

import (
	"errors"
	"time"
)

// Session checkpoints (SPEC §11): the bytes a session's runner wrote of
// its user state, and what it says of them. The supervisor stores the
// bytes and never deserialises them; only a session jail of the same
// owner loads them, under the fence of user code.

// SessionResumed: the key's session had hibernated (or its server died);
// this call's jail loaded its last checkpoint first (SessionState.Resumed
// says what came back).
const SessionResumed SessionStateValue = "resumed"

// Reasons a checkpoint could not bring a session back.
const (
	// ReasonIncompatibleCheckpoint: the checkpoint was made by another
	// Python or checkpoint format than this jail's.
	ReasonIncompatibleCheckpoint SessionReason = "incompatible_checkpoint"
	// ReasonCorruptCheckpoint: the checkpoint's bytes do not match its
	// manifest (sha256, size), or it cannot be read.
	ReasonCorruptCheckpoint SessionReason = "corrupt_checkpoint"
	// ReasonHibernated: the session was saved to a checkpoint and its jail
	// freed (idle, a shutdown); its next call resumes it.
	ReasonHibernated SessionReason = "hibernated"
)

// Checkpoint errors, for the store (mcpserver) and the jail alike.
var (
	// ErrNoCheckpoint: the key has no stored checkpoint.
	ErrNoCheckpoint = errors.New("no checkpoint")
	// ErrCorruptCheckpoint: a stored checkpoint fails its manifest.
	ErrCorruptCheckpoint = errors.New("corrupt checkpoint")
	// ErrCheckpointQuota: storing the checkpoint would pass a quota; the
	// session stays live.
	ErrCheckpointQuota = errors.New("checkpoint quota exceeded")
	// ErrSessionElsewhere: another server process holds the session live.
	ErrSessionElsewhere = errors.New("the session is live on another server")
	// ErrNoSession: no session of that name, live or hibernated.
	ErrNoSession = errors.New("no such session")
)

// NameReason is a name of a session's state and why it was not saved or
// not restored.
type NameReason struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// SavedName is a name a checkpoint holds and its bytes.
type SavedName struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
	// Kind is "value" or "module" (saved by name, re-imported on resume).
	Kind string `json:"kind"`
}

// Checkpoint is one saved state of a session: its bytes and manifest.
type Checkpoint struct {
	// Blob is the runner's stream; opaque to the host.
	Blob []byte `json:"-"`
	// Manifest fields.
	Profile Profile      `json:"profile"`
	Created time.Time    `json:"created"`
	Calls   int          `json:"calls"` // the session's calls before it
	Saved   []SavedName  `json:"saved"`
	Skipped []NameReason `json:"skipped"`
	Python  string       `json:"python"`
	// Rootfs identifies the tree the session ran on (its manifest hash,
	// or "host"); a resume on another refuses the checkpoint.
	Rootfs string `json:"rootfs"`
	// SessionCreated is when the session first started (max_age counts
	// from it across hibernations).
	SessionCreated time.Time `json:"session_created"`
}

// Resume is what a resumed call found of its checkpoint.
type Resume struct {
	// CheckpointAt is when the checkpoint was made, and Calls how many
	// calls of the session it follows.
	CheckpointAt time.Time    `json:"checkpoint_at"`
	Calls        int          `json:"calls"`
	Restored     []string     `json:"restored"`
	NotRestored  []NameReason `json:"not_restored"`
	// Interrupted: the server that last held the session stopped without
	// saving it (killed, or a call was running): the calls after Calls
	// were lost.
	Interrupted bool `json:"interrupted,omitempty"`
}

// CheckpointStore keeps the checkpoints of hibernated sessions by
// (profile, key); mcpserver maps a key to its owner's directory. It is
// safe for concurrent use.
type CheckpointStore interface {
	// Save stores cp as key's checkpoint, replacing any earlier one, or
	// refuses it (ErrCheckpointQuota) leaving the earlier one.
	Save(profile Profile, key string, cp *Checkpoint) error
	// Load returns key's checkpoint, ErrNoCheckpoint, or
	// ErrCorruptCheckpoint.
	Load(profile Profile, key string) (*Checkpoint, error)
	// Delete removes key's checkpoint, if any.
	Delete(profile Profile, key string) error
	// Hold marks key live in this process until release is called, or
	// fails with ErrSessionElsewhere.
	Hold(profile Profile, key string) (release func(), err error)
	// List returns the stored checkpoints of profile ("" for every
	// profile) whose keys start with prefix, sorted by key and then
	// profile. prefix names an owner: "<owner>/", optionally followed by
	// the start of a name. It reads manifests only; one that cannot be
	// read is left out and named in an error wrapping
	// ErrCorruptCheckpoint, returned with the entries that could be.
	List(profile Profile, prefix string) ([]CheckpointInfo, error)
	// Stat returns what key's manifest says of its checkpoint, or
	// ErrNoCheckpoint; it does not read or verify the bytes (Load does).
	Stat(profile Profile, key string) (CheckpointInfo, error)
}

// CheckpointInfo is what a stored checkpoint's manifest says of it, for
// listings and sweeps.
type CheckpointInfo struct {
	Key     string  `json:"key"`
	Profile Profile `json:"profile"`
	// Bytes is the size of the checkpoint's blob.
	Bytes   int64     `json:"bytes"`
	Created time.Time `json:"created"`
	Calls   int       `json:"calls"`
	// SessionCreated is when the session first started.
	SessionCreated time.Time `json:"session_created"`
}
