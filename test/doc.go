// Package integration holds pyjail's tests that need root, namespaces and
// cgroups: each one starts real jails and tries to break an isolation
// property, and the end-to-end tests drive a real `pyjail serve`.
//
// They skip with a stated reason when not run as root or under -short,
// unless PYJAIL_TEST_MUST_RUN=1 (set by CI and the Vagrant VM) turns the
// skip into a failure. The test binary re-executes itself as the
// container init, as runc's own integration tests do.
package integration
