// Package changes reports what an execution did to a workspace directory:
// Scan records the tree before and after a run, and Diff turns the two
// records into the created/modified/deleted lists of SPEC §4, with sizes
// and SHA-256 digests.
//
// The workspace is written by sandboxed code and must be treated as
// hostile. The package never follows a symbolic link (a link is recorded
// as a link, never read through), never opens anything but a regular file
// for hashing, never blocks on a FIFO (files are opened with O_NONBLOCK and
// checked with fstat), resolves every path beneath the root with os.Root,
// and bounds its work by a file-count limit. It never modifies the
// workspace.
//
// Walk is exported so that other packages that list a workspace
// (workspace/wsfs, workspace/snapshot) share one confined,
// symlink-refusing traversal.
package changes
