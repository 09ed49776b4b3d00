package walk

import (
	"strings"
)

// Defaults that Limits.WithDefaults applies to zero (or negative) fields.
const (
	DefaultMaxDepth = 64
	DefaultMaxFiles = 100_000
	DefaultMaxBytes = 1 << 30
)

// MaxDepthCeiling caps Limits.MaxDepth: a walk holds one descriptor per
// level of nesting, and this many per concurrent walk stays far below any
// RLIMIT_NOFILE that Go's runtime raises the soft limit to.
const MaxDepthCeiling = 1024

// Limits is the shape a workspace may have. The zero value means the
// defaults; callers keep one Limits per workspace and pass it to every
// walk and to every host-side creation check, so the jail, the file tools
// and the snapshots agree.
type Limits struct {
	// MaxDepth caps how many directories may be nested below the
	// workspace root: with 64, "d1/…/d64/file" is allowed and a 65th
	// directory is not. Zero means DefaultMaxDepth; values above
	// MaxDepthCeiling mean MaxDepthCeiling.
	MaxDepth int
	// MaxFiles caps the entries below the root: files, directories,
	// links and special files alike. Zero means DefaultMaxFiles.
	MaxFiles int
	// MaxBytes caps the summed apparent size of the regular files, which
	// also bounds what hashing them reads. Zero means DefaultMaxBytes.
	MaxBytes int64
}

// WithDefaults returns l with every zero or negative field replaced by its
// default and MaxDepth clamped to MaxDepthCeiling.
func (l Limits) WithDefaults() Limits {
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	l.MaxDepth = min(l.MaxDepth, MaxDepthCeiling)
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	return l
}

// Dirs returns how many directories the clean, slash-separated relative
// path rel would sit under: 0 for "x.txt", 2 for "a/b/x.txt".
func Dirs(rel string) int {
	if rel == "" || rel == "." {
		return 0
	}
	return strings.Count(rel, "/")
}

// CheckPath reports whether creating the file or directory rel (clean,
// slash-separated, relative to the workspace root) keeps it within
// MaxDepth, without touching the disk. A directory counts itself: isDir
// adds one level. The error is a *LimitError wrapping ErrTooDeep with the
// exact count: "\"d/d/…/x.txt\" would be under 2,000 nested directories;
// the limit is 64".
func (l Limits) CheckPath(rel string, isDir bool) error {
	l = l.WithDefaults()
	n := Dirs(rel)
	if isDir {
		n++
	}
	if n > l.MaxDepth {
		return &LimitError{Err: ErrTooDeep, Limit: int64(l.MaxDepth), Got: int64(n), Exact: true, Path: rel, Would: true}
	}
	return nil
}

// Usage is what a walk counted: entries below the root, the apparent
// bytes of regular files and the deepest directory nesting.
type Usage struct {
	Files int64
	Bytes int64
	Depth int
}

// CheckAdd reports whether adding files entries and bytes bytes (either
// may be negative: a file that shrinks) to a workspace of usage u stays
// within l. The error is a *LimitError with Would set.
func (u Usage) CheckAdd(l Limits, files, bytes int64) error {
	l = l.WithDefaults()
	if n := u.Files + files; n > int64(l.MaxFiles) {
		return &LimitError{Err: ErrTooManyFiles, Limit: int64(l.MaxFiles), Got: n, Exact: true, Would: true}
	}
	if n := u.Bytes + bytes; n > l.MaxBytes {
		return &LimitError{Err: ErrTooLarge, Limit: l.MaxBytes, Got: n, Exact: true, Would: true}
	}
	return nil
}
