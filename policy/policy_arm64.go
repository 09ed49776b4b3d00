package policy

// nativeArch is the libseccomp name of the architecture the filter covers.
// Only the native one is listed: 32-bit ARM calls then hit the
// bad-architecture action and die.
func nativeArch() string { return "arm64" }

// archRules are the arm64-only additions to the base table: none. arm64
// only has the generic system calls, all of which the base table names.
func archRules() []Rule { return nil }
