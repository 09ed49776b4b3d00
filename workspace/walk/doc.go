// Package walk traverses a workspace directory that sandboxed code has
// written, within shape limits, for every host-side walk of it: the change
// report (workspace/changes), the file tools' listing (workspace/wsfs),
// snapshots (workspace/snapshot) and the chown the supervisor does before
// a run (Chown).
//
// The tree is hostile: it may be thousands of directories deep, hold
// millions of entries, symbolic links, FIFOs and devices, and change while
// it is read. So the walk descends by opening each child directory
// relative to its parent's descriptor (openat with O_NOFOLLOW,
// O_DIRECTORY and O_NONBLOCK) and inspects entries with fstatat
// (AT_SYMLINK_NOFOLLOW) relative to the same descriptor: no path is ever
// resolved again from the root, so the work is linear in the number of
// entries, whatever the depth. It never follows a symbolic link, never
// opens anything but a directory (and a regular file, on request, checked
// by fstat after an O_NONBLOCK open), holds one descriptor per level of
// nesting and one directory buffer, and checks its context at every
// entry.
//
// Limits caps the depth, the number of entries and the bytes of regular
// files. A walk that reaches a limit stops at once with a *LimitError
// whose message says in plain words what was exceeded ("workspace has
// more than 64 nested directories (at "d/d/…/d"); the limit is 64"); the
// same limits are checked before the host creates anything (CheckPath,
// Usage.CheckAdd). The package never modifies the workspace, except that
// Chown changes the owner of entries that do not have it yet.
package walk
