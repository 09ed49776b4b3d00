// Package snapshot saves and restores the workspace directory (SPEC §6)
// for the create/list/restore/delete/diff_state_snapshot tools.
//
// A snapshot is one JSON document in the snapshot directory, written
// durably (temporary file, fsync, rename, fsync of the directory). It
// records every regular file (path, size, mtime, permission bits, SHA-256,
// and content as UTF-8 text or base64) and every directory. Symbolic
// links, FIFOs, sockets, devices and names that are not valid UTF-8 are
// not recorded; Meta.Skipped names them.
//
// Restore is all-or-nothing. The snapshot is decoded and verified while
// the new tree is built in a staging directory next to the workspace;
// only when it is complete and fsynced is it swapped for the workspace in
// one renameat2(RENAME_EXCHANGE), after which the old tree is deleted. A
// kill at any instant leaves the workspace path naming either the old or
// the new complete tree; Open removes the leftover staging or old tree.
// When the workspace is itself a mount point (the exchange fails with
// EBUSY or EXDEV), Restore falls back to an in-place restore driven by a
// journal in the snapshot directory, whose guarantee is weaker: a kill
// mid-restore can leave a mixed tree until the next Open rolls the
// journal forward to the snapshot.
//
// The package must never follow a symbolic link out of the workspace
// (every path is resolved beneath it with os.Root, and files are only
// opened after lstat shows a regular file, with O_NONBLOCK), never write
// outside the workspace, its staging sibling and the snapshot directory,
// never restore setuid, setgid or sticky bits, and never trust a
// snapshot document: paths are validated, content is checked against its
// SHA-256 before anything is swapped in, and sizes are bounded by Limits.
// The workspace is walked with workspace/walk (descriptor-relative, so
// linear in its entries whatever its depth) within the shape limits it
// shares with the file tools and the jail, Limits.Shape: Create and Diff
// refuse a workspace beyond them, Restore refuses a snapshot that would
// exceed them and replaces a workspace that does. Comparing files with the
// workspace reads no more than the snapshot's own bytes.
package snapshot
