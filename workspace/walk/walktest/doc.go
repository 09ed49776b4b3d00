// Package walktest builds hostile workspace trees for tests of the
// packages that walk a workspace: Chain makes a directory chain deeper
// than PATH_MAX allows a path to be, the way sandboxed code can (one
// mkdirat and one openat per level), bypassing every host-side check. It
// is for tests only and must not be imported by production code.
package walktest
