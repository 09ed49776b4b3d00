package policy

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"time"

	"github.com/pyjail/pyjail/record"
)

// ProfilePackages is the profile pip runs in for install_packages (SPEC
// §13): full Python, since pip needs os and subprocess, kernel isolation
// only, the tenant's staging directory as its workspace, and egress to
// the index host alone. Load derives it from Packages; it is not
// configured by hand.
const ProfilePackages record.Profile = "packages"

// Packages configures per-tenant package installs. Without IndexURL the
// install tools say that the server has no index.
type Packages struct {
	// IndexURL is a PEP 503/691 simple index or a PyPI mirror
	// ("https://pypi.org/simple"). Its host must be a name: the gateway
	// reaches names only, and an address is pinned with Resolve.
	IndexURL string `json:"index_url,omitempty"`
	// Resolve pins the index host's addresses (a mirror on a private
	// network or on loopback); the gateway refuses such addresses unless
	// pinned.
	Resolve []string `json:"resolve,omitempty"`
	// AllowBuilds lets pip build source distributions. Off by default: an
	// sdist's build runs its own code (in the install jail, but still).
	AllowBuilds bool `json:"allow_builds,omitempty"`
	// Timeout bounds each of an install's two pip runs; default 300 s.
	Timeout Duration `json:"timeout,omitempty"`
	// MemoryBytes is the install jail's memory limit; default 1 GiB.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// CacheDir is the shared wheel cache; default <data-dir>/wheel-cache
	// or <state_dir>/wheel-cache.
	CacheDir string `json:"cache_dir,omitempty"`
	// Bytes and Count are each tenant's default quotas (packages_bytes,
	// packages); the tokens file may set others per tenant. Defaults
	// 512 MiB and 64 distributions.
	Bytes int64 `json:"bytes,omitempty"`
	Count int   `json:"count,omitempty"`
}

// Effective returns p with its defaults filled in.
func (p Packages) Effective() Packages {
	if p.Timeout == 0 {
		p.Timeout = Duration(300 * time.Second)
	}
	if p.MemoryBytes == 0 {
		p.MemoryBytes = 1 * GiB
	}
	if p.Bytes == 0 {
		p.Bytes = 512 * MiB
	}
	if p.Count == 0 {
		p.Count = 64
	}
	return p
}

// IndexHost returns the index URL's host name and port.
func (p Packages) IndexHost() (string, int, error) {
	u, err := url.Parse(p.IndexURL)
	if err != nil {
		return "", 0, fmt.Errorf("index_url %q: %w", p.IndexURL, err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return "", 0, fmt.Errorf("index_url %q: want an https:// (or, for a mirror the operator runs, http://) URL", p.IndexURL)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", 0, fmt.Errorf("index_url %q: credentials, queries and fragments are not accepted", p.IndexURL)
	}
	host := u.Hostname()
	if host == "" || isAddr(host) {
		return "", 0, fmt.Errorf("index_url %q: the host must be a name (pin its address with resolve)", p.IndexURL)
	}
	port := 443
	if u.Scheme == "http" {
		port = 80
	}
	if s := u.Port(); s != "" {
		if port, err = strconv.Atoi(s); err != nil || port < 1 || port > 65535 {
			return "", 0, fmt.Errorf("index_url %q: bad port", p.IndexURL)
		}
	}
	return host, port, nil
}

// profile is the install jail's profile for an index at host:port.
func (p Packages) profile(host string, port int) Profile {
	p = p.Effective()
	lim := DefaultLimits()
	lim.Timeout, lim.MaxTimeout = p.Timeout, p.Timeout
	lim.MemoryBytes = p.MemoryBytes
	// pip starts a few interpreters and threads of its own.
	lim.Pids = 128
	lim.TmpBytes = 256 * MiB
	lim.FileSizeBytes = 512 * MiB
	return Profile{
		Name: ProfilePackages, Python: LayerNone, Workspace: true, Limits: lim,
		Egress: &Egress{
			Rules: []EgressRule{{Host: host, Ports: []int{port}, Resolve: p.Resolve}},
			// Wheels are large; the byte cap bounds a hostile index.
			Limits: EgressLimits{MaxConnections: 256, MaxBytesIn: 2 * GiB, MaxBytesOut: 16 * MiB},
		},
	}
}

// addPackagesProfile derives ProfilePackages from c.Packages, if set.
func (c *Config) addPackagesProfile() error {
	if _, ok := c.Profiles[ProfilePackages]; ok {
		return fmt.Errorf("profile %q is derived from the packages section; do not configure it", ProfilePackages)
	}
	if c.Packages.IndexURL == "" {
		return nil
	}
	host, port, err := c.Packages.IndexHost()
	if err != nil {
		return fmt.Errorf("packages: %w", err)
	}
	c.Profiles[ProfilePackages] = c.Packages.profile(host, port)
	return nil
}

func checkPackages(c Config) error {
	p := c.Packages
	if p.Timeout < 0 || p.MemoryBytes < 0 || p.Bytes < 0 || p.Count < 0 {
		return fmt.Errorf("packages: limits must not be negative")
	}
	if p.Timeout.D() > 30*time.Minute {
		return fmt.Errorf("packages: timeout %v is above 30 min", p.Timeout.D())
	}
	if p.IndexURL != "" {
		if _, _, err := p.IndexHost(); err != nil {
			return fmt.Errorf("packages: %w", err)
		}
	}
	return nil
}

// isAddr reports whether host is an IP address rather than a name.
func isAddr(host string) bool {
	_, err := netip.ParseAddr(host)
	return err == nil
}

// SetPackages sets c's packages section and derives ProfilePackages from
// it, as Load does for a config file's.
func (c *Config) SetPackages(p Packages) error {
	delete(c.Profiles, ProfilePackages)
	c.Packages = p
	return c.addPackagesProfile()
}
