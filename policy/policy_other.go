//go:build !amd64 && !arm64

package policy

import "runtime"

// nativeArch names an architecture pyjail has no allowlist for. The name is
// well-formed, so that policy builds and tests everywhere, but package jail
// refuses it: a filter written for amd64 and arm64 must not be trusted on an
// architecture whose system call set nobody reviewed.
func nativeArch() string { return "unsupported_" + runtime.GOARCH }

// archRules adds nothing on an unsupported architecture.
func archRules() []Rule { return nil }
