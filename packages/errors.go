package packages

import "errors"

// Sentinel errors. Callers match them with errors.Is; each wrapping error
// is a sentence a model can act on.
var (
	// ErrRequirement means a requirement string is not one this server
	// installs: a URL, a path, an option, or not PEP 508 at all.
	ErrRequirement = errors.New("bad requirement")
	// ErrBuildRefused means a requirement resolves to a source
	// distribution only, whose build code the server does not run.
	ErrBuildRefused = errors.New("source distributions are not built here")
	// ErrHash means a downloaded or cached file does not match the
	// sha256 the index gives for it.
	ErrHash = errors.New("hash mismatch")
	// ErrQuota means the layer would pass the tenant's packages_bytes or
	// packages quota.
	ErrQuota = errors.New("package quota exceeded")
	// ErrNotInstalled means remove_packages named a distribution the
	// layer does not hold.
	ErrNotInstalled = errors.New("not installed")
	// ErrInstall means pip failed for another reason; its message says
	// which, from pip's own output.
	ErrInstall = errors.New("installing failed")
	// ErrNoIndex means the server has no index configured.
	ErrNoIndex = errors.New("no package index is configured (packages.index_url)")
)
