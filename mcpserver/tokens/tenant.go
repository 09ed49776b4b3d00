package tokens

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Tenant is who a token belongs to: what Authenticate returns and what the
// HTTP server scopes every tool, resource and prompt to.
type Tenant struct {
	// Name is also the tenant's directory under --data-dir/tenants/; it is
	// always a valid name (see ValidName).
	Name string
	// Operator tenants may see operator-only figures (sandbox://status).
	Operator bool
	// Quota holds the tenant's overrides; a zero field means the server's
	// default.
	Quota Quota
	// Scoped marks a caller whose rights come from its token's scopes
	// (sign-in) rather than from its entry in the tokens file; Granted are
	// then all it may do. See Rights.
	Scoped  bool
	Granted Rights
	// Egress, when set, narrows the egress allowlist of every profile
	// this tenant runs to its host patterns; it can never widen it: a
	// pattern outside a profile's rules fails the run.
	Egress Narrowing
}

// Narrowing is a tenant's subset of its profiles' egress hosts. It is a
// comparable value (Tenant stays comparable): the patterns are kept
// comma-joined.
type Narrowing struct {
	// Set: the tenant is narrowed (to nothing, if Hosts is empty).
	Set   bool
	Hosts string
}

// NewNarrowing narrows to hosts; nil means not narrowed.
func NewNarrowing(hosts []string) Narrowing {
	if hosts == nil {
		return Narrowing{}
	}
	return Narrowing{Set: true, Hosts: strings.Join(hosts, ",")}
}

// List returns the host patterns, or nil when not narrowed.
func (n Narrowing) List() []string {
	if !n.Set {
		return nil
	}
	if n.Hosts == "" {
		return []string{}
	}
	return strings.Split(n.Hosts, ",")
}

// checkEgressHosts refuses patterns no egress rule could hold. The full
// check (inside the profile's rules) is the policy's, at run time.
func checkEgressHosts(hosts []string) error {
	for _, h := range hosts {
		if h == "" || strings.Trim(h, "abcdefghijklmnopqrstuvwxyz0123456789.-*") != "" {
			return fmt.Errorf("egress_hosts: %q is not a lower-case host name or *.suffix", h)
		}
	}
	return nil
}

// Quota overrides the server's per-tenant limits. Every field is
// optional: zero means "the server's default", never "unlimited" or
// "nothing allowed". Negative values are refused when a file is parsed.
type Quota struct {
	ConcurrentRuns int   `json:"concurrent_runs,omitempty"`
	RunsPerMinute  int   `json:"runs_per_minute,omitempty"`
	WorkspaceBytes int64 `json:"workspace_bytes,omitempty"`
	WorkspaceFiles int   `json:"workspace_files,omitempty"`
	Snapshots      int   `json:"snapshots,omitempty"`
	SnapshotBytes  int64 `json:"snapshot_bytes,omitempty"`
	// PackagesBytes and Packages bound the tenant's package layer (bytes
	// and distributions, SPEC §13).
	PackagesBytes int64 `json:"packages_bytes,omitempty"`
	Packages      int   `json:"packages,omitempty"`
}

// quotaKey names one Quota field in both file formats and in --quota.
type quotaKey struct {
	name  string
	bytes bool // takes KiB/MiB/GiB/TiB suffixes in the line format
	get   func(Quota) int64
	set   func(*Quota, int64)
}

// quotaKeys is the one list of quota keys, in the order files and `token
// list` show them.
var quotaKeys = []quotaKey{
	{"concurrent_runs", false, func(q Quota) int64 { return int64(q.ConcurrentRuns) }, func(q *Quota, v int64) { q.ConcurrentRuns = int(v) }},
	{"runs_per_minute", false, func(q Quota) int64 { return int64(q.RunsPerMinute) }, func(q *Quota, v int64) { q.RunsPerMinute = int(v) }},
	{"workspace_bytes", true, func(q Quota) int64 { return q.WorkspaceBytes }, func(q *Quota, v int64) { q.WorkspaceBytes = v }},
	{"workspace_files", false, func(q Quota) int64 { return int64(q.WorkspaceFiles) }, func(q *Quota, v int64) { q.WorkspaceFiles = int(v) }},
	{"snapshots", false, func(q Quota) int64 { return int64(q.Snapshots) }, func(q *Quota, v int64) { q.Snapshots = int(v) }},
	{"snapshot_bytes", true, func(q Quota) int64 { return q.SnapshotBytes }, func(q *Quota, v int64) { q.SnapshotBytes = v }},
	{"packages_bytes", true, func(q Quota) int64 { return q.PackagesBytes }, func(q *Quota, v int64) { q.PackagesBytes = v }},
	{"packages", false, func(q Quota) int64 { return int64(q.Packages) }, func(q *Quota, v int64) { q.Packages = int(v) }},
}

func lookupQuotaKey(name string) (quotaKey, bool) {
	for _, k := range quotaKeys {
		if k.name == name {
			return k, true
		}
	}
	return quotaKey{}, false
}

// quotaKeyNames lists the keys for error messages.
func quotaKeyNames() string {
	names := make([]string, len(quotaKeys))
	for i, k := range quotaKeys {
		names[i] = k.name
	}
	return strings.Join(names, ", ")
}

// validate refuses negative overrides: they have no meaning, and a
// server comparing with them would refuse everything or nothing.
func (q Quota) validate() error {
	var bad []string
	for _, k := range quotaKeys {
		if k.get(q) < 0 {
			bad = append(bad, k.name)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("negative quota %s (0 means the server default)", strings.Join(bad, ", "))
	}
	return nil
}

// String renders the overrides as the line format's key=value pairs, or
// "defaults" when there are none.
func (q Quota) String() string {
	var parts []string
	for _, k := range quotaKeys {
		if v := k.get(q); v != 0 {
			parts = append(parts, k.name+"="+formatQuotaValue(k, v))
		}
	}
	if len(parts) == 0 {
		return "defaults"
	}
	return strings.Join(parts, " ")
}

// SetQuota sets one quota key from its text form, as the line format and
// `pyjail token add --quota KEY=VALUE` write it.
func (q *Quota) SetQuota(key, value string) error {
	k, ok := lookupQuotaKey(key)
	if !ok {
		return fmt.Errorf("unknown quota %q (known: %s)", key, quotaKeyNames())
	}
	v, err := parseQuotaValue(k, value)
	if err != nil {
		return err
	}
	k.set(q, v)
	return nil
}

const (
	kib = 1 << 10
	mib = 1 << 20
	gib = 1 << 30
	tib = 1 << 40
)

// byteUnits are the suffixes the line format accepts on *_bytes keys,
// largest first so formatting picks the largest exact one.
var byteUnits = []struct {
	suffix string
	size   int64
}{{"TiB", tib}, {"GiB", gib}, {"MiB", mib}, {"KiB", kib}}

func parseQuotaValue(k quotaKey, s string) (int64, error) {
	mult := int64(1)
	num := s
	if k.bytes {
		for _, u := range byteUnits {
			if n, ok := strings.CutSuffix(s, u.suffix); ok {
				num, mult = n, u.size
				break
			}
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		unit := ""
		if k.bytes {
			unit = ", optionally with a KiB, MiB, GiB or TiB suffix"
		}
		return 0, fmt.Errorf("quota %s=%q: want a non-negative integer%s", k.name, s, unit)
	}
	if v < 0 {
		return 0, fmt.Errorf("quota %s=%q: negative (0 means the server default)", k.name, s)
	}
	if v > (1<<63-1)/mult || (!k.bytes && v > 1<<31-1) {
		return 0, fmt.Errorf("quota %s=%q: too large", k.name, s)
	}
	return v * mult, nil
}

func formatQuotaValue(k quotaKey, v int64) string {
	if k.bytes {
		for _, u := range byteUnits {
			if v >= u.size && v%u.size == 0 {
				return strconv.FormatInt(v/u.size, 10) + u.suffix
			}
		}
	}
	return strconv.FormatInt(v, 10)
}

// maxNameLen bounds a tenant name: one directory name component with
// room to spare, and short enough for a metrics label.
const maxNameLen = 63

// ValidName reports whether name may name a tenant: 1 to 63 characters
// of [a-z0-9_-], the first a letter or digit. Tenant names become
// directory names, so nothing that could be ".", "..", hidden, contain a
// separator or differ only in case on another filesystem is allowed.
func ValidName(name string) bool {
	if name == "" || len(name) > maxNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

func checkName(name string) error {
	if !ValidName(name) {
		return fmt.Errorf("%w %q: want 1 to %d characters of a-z, 0-9, '_' and '-', starting with a letter or digit",
			ErrInvalidName, name, maxNameLen)
	}
	return nil
}

// Digest is the sha256 of a token: all a tokens file stores.
type Digest [sha256.Size]byte

// Hash returns the digest of a token as a tokens file stores it.
func Hash(token string) Digest { return sha256.Sum256([]byte(token)) }

// String is the full lowercase hex digest, as files store it.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// Short is the first 8 hex digits, enough to tell entries apart in
// `token list` and logs without printing the stored digest.
func (d Digest) Short() string { return hex.EncodeToString(d[:4]) }

// emptyDigest is sha256(""): a file that stores it would accept an empty
// bearer token, which is what `printf ” | sha256sum` produces by mistake.
var emptyDigest = Digest(sha256.Sum256(nil))

// parseDigest decodes a stored digest. Its errors never quote the value:
// an operator who pasted the token itself must not see it in a log.
func parseDigest(s string) (Digest, error) {
	var d Digest
	if len(s) != hex.EncodedLen(len(d)) {
		hint := ""
		if strings.HasPrefix(s, TokenPrefix) {
			hint = "; this looks like a token: store its sha256 instead"
		}
		return d, fmt.Errorf("sha256 is %d characters, want %d hex digits%s", len(s), hex.EncodedLen(len(d)), hint)
	}
	if _, err := hex.Decode(d[:], []byte(s)); err != nil {
		return Digest{}, errors.New("sha256 is not hexadecimal")
	}
	if d == emptyDigest {
		return Digest{}, errors.New("sha256 is the digest of the empty token")
	}
	return d, nil
}

// Entry is one line or JSON entry of a tokens file.
type Entry struct {
	Tenant Tenant
	SHA256 Digest
}
