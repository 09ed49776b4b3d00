// Package changes reports what an execution did to a workspace directory:
// Scan records the tree before a run, and Since walks it once after the
// run and returns the created/modified/deleted lists of SPEC §4, with
// sizes and SHA-256 digests (Diff does the same from two Scans).
//
// The workspace is written by sandboxed code and must be treated as
// hostile. The package never follows a symbolic link (a link is recorded
// as a link, never read through), never opens anything but a regular file
// for hashing, never blocks on a FIFO (files are opened with O_NONBLOCK and
// checked with fstat), walks with workspace/walk (descriptor-relative, so
// linear in the entries whatever the depth) and resolves any other path
// beneath the root with os.Root. Its work is bounded by walk.Limits: a
// workspace beyond them is a *walk.LimitError, found after at most the
// limits' worth of work, and hashing reads no more than the bytes limit.
// It never modifies the workspace.
package changes
