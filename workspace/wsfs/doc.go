// Package wsfs reads, writes and lists files in the workspace directory on
// behalf of the MCP workspace tools (write_workspace_file,
// read_workspace_file, list_workspace_files; SPEC §5).
//
// The workspace is written by sandboxed code and must be treated as
// hostile. Every path is resolved beneath the workspace with os.Root, so
// neither ".." nor a symbolic link can reach outside it; absolute paths,
// NUL bytes and over-long names are refused before any system call. The
// package must never open anything but a regular file for reading (FIFOs
// are opened with O_NONBLOCK and refused after fstat, devices are refused
// after stat and never opened), never follow a symbolic link while
// listing or through a parent directory while writing, and never hold
// more than the configured limits in memory. Listings and the room check
// before a write walk with workspace/walk, descriptor-relative and bounded
// by the workspace's shape limits (depth, entries, bytes); a write that
// would exceed them is refused before anything is created. Writes are
// atomic (temporary file, fsync, rename, fsync of the directory). The package does not change ownership of what it creates;
// the supervisor does that before each run.
package wsfs
