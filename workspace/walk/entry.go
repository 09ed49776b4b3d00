package walk

import "io/fs"

// Func is called for every entry below the walk's start directory. An
// error stops the walk and is returned, except that fs.SkipDir skips the
// entry (and a directory's contents) and fs.SkipAll ends the walk without
// error.
type Func func(e *Entry) error

// Entry is one directory entry as the walk found it. Its methods use the
// parent directory's descriptor, so they are valid only during the call
// to Func; the fields may be kept.
type Entry struct {
	// Path is slash-separated and relative to the start of the walk (for
	// In, it begins with the rel given).
	Path string
	// Name is the last element of Path.
	Name string
	// Depth counts the elements of Path: 1 for an entry of the start
	// directory of Dir.
	Depth int
	// Info is the entry's own metadata (fstatat with AT_SYMLINK_NOFOLLOW):
	// a link is reported as a link. Info.Sys() is a *unix.Stat_t.
	Info fs.FileInfo

	st     *sysStat
	parent int
}
