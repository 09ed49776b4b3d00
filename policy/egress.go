package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Egress is a profile's network policy (SPEC §12). A profile without one
// (nil, the default of every profile) has no network at all: its jail's
// network namespace holds only lo and nothing on the host serves it. With
// one, the jail's only way out is the host-side gateway of package egress,
// which decides every connection by these rules.
type Egress struct {
	// Rules lists the hosts the jail may reach. A name that matches no
	// rule is refused.
	Rules []EgressRule `json:"rules"`
	// Limits bounds one run's use of the network.
	Limits EgressLimits `json:"limits"`
}

// EgressRule allows one host, or every subdomain of one, on some ports.
type EgressRule struct {
	// Host is an exact name ("data.example.org") or "*." and a suffix of
	// at least two labels ("*.example.org": any name below example.org,
	// not example.org itself). Names are compared in lower case without
	// a trailing dot. IP literals are refused: an address is reached by
	// naming it here and pinning it with Resolve.
	Host string `json:"host"`
	// Ports the jail may connect to; default [443, 80].
	Ports []int `json:"ports,omitempty"`
	// Resolve pins the host's addresses: the gateway connects to these
	// and does no DNS lookup for it. A pin is the only way a loopback,
	// private, link-local or metadata address may be reached.
	Resolve []string `json:"resolve,omitempty"`
	// Upstream "https" makes the gateway the TLS client: the jail sends
	// plain http://Host/… requests (through HTTP_PROXY), and the gateway
	// forwards each over TLS to Host:443 with full certificate
	// verification. It is required for Inject, and only an exact Host
	// may have it. "" (the default) forwards what the jail sends as it
	// is: HTTPS as an end-to-end tunnel, plain HTTP as plain HTTP.
	Upstream string `json:"upstream,omitempty"`
	// Inject lists headers the gateway sets on every request it forwards
	// to Host, with values read on the host when the request is made.
	Inject []Inject `json:"inject,omitempty"`
}

// Inject is one header the gateway adds. Its value comes from a file or
// from the server's environment, never from the configuration text, so
// that the config file can be shown and reviewed without the secret.
type Inject struct {
	// Header is the header name ("Authorization", "X-Api-Key").
	Header string `json:"header"`
	// File is an absolute host path whose contents (without a trailing
	// newline) are the value.
	File string `json:"file,omitempty"`
	// Env names an environment variable of the server holding the value.
	Env string `json:"env,omitempty"`
	// Prefix is put before the value ("Bearer "); it is not secret.
	Prefix string `json:"prefix,omitempty"`
}

// EgressLimits bound one run's network use; zero fields take the
// defaults of DefaultEgressLimits. A run that passes one is ended with
// the verdict network_limit.
type EgressLimits struct {
	// MaxConnections counts connections and requests the gateway opens
	// for the run (refusals included, so a scan of names is bounded).
	MaxConnections int `json:"max_connections,omitempty"`
	// MaxBytesIn counts bytes from upstreams to the jail.
	MaxBytesIn int64 `json:"max_bytes_in,omitempty"`
	// MaxBytesOut counts bytes from the jail to upstreams.
	MaxBytesOut int64 `json:"max_bytes_out,omitempty"`
}

// DefaultEgressLimits are the per-run limits of a rule set that names none.
func DefaultEgressLimits() EgressLimits {
	return EgressLimits{MaxConnections: 64, MaxBytesIn: 256 * MiB, MaxBytesOut: 16 * MiB}
}

// Effective returns l with zero fields set to their defaults.
func (l EgressLimits) Effective() EgressLimits {
	d := DefaultEgressLimits()
	if l.MaxConnections == 0 {
		l.MaxConnections = d.MaxConnections
	}
	if l.MaxBytesIn == 0 {
		l.MaxBytesIn = d.MaxBytesIn
	}
	if l.MaxBytesOut == 0 {
		l.MaxBytesOut = d.MaxBytesOut
	}
	return l
}

// DefaultEgressPorts are a rule's ports when it names none.
func DefaultEgressPorts() []int { return []int{443, 80} }

// UpstreamHTTPS is the value of EgressRule.Upstream that makes the
// gateway the TLS client.
const UpstreamHTTPS = "https"

// EffectivePorts returns the rule's ports, or the defaults.
func (r EgressRule) EffectivePorts() []int {
	if len(r.Ports) == 0 {
		if r.Upstream == UpstreamHTTPS {
			return []int{80}
		}
		return DefaultEgressPorts()
	}
	return r.Ports
}

// CanonicalHost returns name in the form rules compare: lower case, one
// trailing dot removed. It does no IDNA mapping: a name with bytes
// outside [a-z0-9.-] matches no rule, since rules may hold only those.
func CanonicalHost(name string) string {
	return strings.TrimSuffix(strings.ToLower(name), ".")
}

// Matches reports whether the rule covers host (already canonical).
func (r EgressRule) Matches(host string) bool {
	if suffix, ok := strings.CutPrefix(r.Host, "*."); ok {
		return strings.HasSuffix(host, "."+suffix) && validHostname(host)
	}
	return host == r.Host
}

// Lookup returns the first rule that covers host (canonicalised here).
func (e *Egress) Lookup(host string) (EgressRule, bool) {
	if e == nil {
		return EgressRule{}, false
	}
	host = CanonicalHost(host)
	for _, r := range e.Rules {
		if r.Matches(host) {
			return r, true
		}
	}
	return EgressRule{}, false
}

// Hosts lists the rules' host patterns, for status pages: the policy
// shown to users and tenants, never the injected values.
func (e *Egress) Hosts() []string {
	if e == nil {
		return nil
	}
	out := make([]string, 0, len(e.Rules))
	for _, r := range e.Rules {
		out = append(out, r.Host)
	}
	return out
}

// Narrow returns the policy restricted to hosts, the patterns a tenant's
// entry in the tokens file names. Each pattern must lie inside a rule of
// e: an exact name matched by a rule becomes a rule of its own with that
// rule's settings, and "*.sub.example.org" narrows a rule "*.example.org"
// (or equals it). A pattern inside no rule is an error: a tenant's entry
// narrows its profiles' policy, never widens it. A nil e stays nil.
func (e *Egress) Narrow(hosts []string) (*Egress, error) {
	if e == nil || hosts == nil {
		return e, nil
	}
	out := &Egress{Limits: e.Limits, Rules: []EgressRule{}}
	var errs []error
	for _, h := range hosts {
		if err := checkHostPattern(h); err != nil {
			errs = append(errs, err)
			continue
		}
		var found bool
		for _, r := range e.Rules {
			if !patternCovers(r.Host, h) {
				continue
			}
			nr := r
			nr.Host = h
			nr.Ports = slices.Clone(r.Ports)
			nr.Resolve = slices.Clone(r.Resolve)
			nr.Inject = slices.Clone(r.Inject)
			out.Rules = append(out.Rules, nr)
			found = true
			break
		}
		if !found {
			errs = append(errs, fmt.Errorf("egress host %q is not inside the profile's allowlist %v: a tenant may narrow it, never widen it", h, e.Hosts()))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// patternCovers reports whether the rule pattern outer includes every name the
// pattern inner matches.
func patternCovers(outer, inner string) bool {
	if outer == inner {
		return true
	}
	suffix, ok := strings.CutPrefix(outer, "*.")
	if !ok {
		return false
	}
	inner = strings.TrimPrefix(inner, "*.")
	return strings.HasSuffix(inner, "."+suffix)
}

// validHostname reports whether name is a DNS name of letters, digits and
// hyphens, in lower case, with labels of 1 to 63 bytes.
func validHostname(name string) bool {
	if name == "" || len(name) > 253 {
		return false
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// looksNumeric reports whether every label of name is a number in some
// base (decimal, 0x hex, leading-zero octal): inet_aton reads such names
// as IPv4 addresses ("0x7f.1" is 127.0.0.1), so a rule must not name one.
func looksNumeric(name string) bool {
	for label := range strings.SplitSeq(name, ".") {
		if _, err := strconv.ParseUint(label, 0, 32); err != nil {
			return false
		}
	}
	return true
}

// AddressLike reports whether a host name is an address in some
// notation: an IPv4 or IPv6 literal (bracketed or not), or every label a
// number ("2130706433", "0x7f.1", "0177.0.0.1"), which inet_aton and
// many resolvers read as an IPv4 address. Rules never name one, and the
// gateway refuses one as a target.
func AddressLike(name string) bool {
	name = strings.TrimSuffix(name, ".")
	return isIPLiteral(name) || looksNumeric(name)
}

func isIPLiteral(name string) bool {
	_, err := netip.ParseAddr(strings.Trim(name, "[]"))
	return err == nil
}

func checkHostPattern(h string) error {
	name := strings.TrimPrefix(h, "*.")
	switch {
	case h == "":
		return errors.New("egress host is empty")
	case strings.Contains(name, "*"):
		return fmt.Errorf("egress host %q: a wildcard is allowed only as the whole first label (\"*.example.org\")", h)
	case name != h && !strings.Contains(name, "."):
		return fmt.Errorf("egress host %q: a wildcard suffix needs at least two labels", h)
	case isIPLiteral(name) || looksNumeric(name):
		return fmt.Errorf("egress host %q is an IP address: name the host and pin its address with \"resolve\"", h)
	case !validHostname(name):
		return fmt.Errorf("egress host %q is not a lower-case DNS name of letters, digits and hyphens", h)
	}
	return nil
}

// validHeaderName accepts an RFC 9110 token.
func validHeaderName(h string) bool {
	if h == "" {
		return false
	}
	for _, c := range []byte(h) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0) {
			return false
		}
	}
	return true
}

// framingHeaders are headers the gateway owns: injecting one would let
// the configuration change how requests are framed or routed.
var framingHeaders = []string{"host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer", "keep-alive", "proxy-connection", "proxy-authorization", "proxy-authenticate"}

// Validate checks the policy and returns every problem, each naming its
// rule and the value at fault.
func (e *Egress) Validate() error {
	if e == nil {
		return nil
	}
	var errs []error
	bad := func(i int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("egress rule %d: "+format, append([]any{i}, args...)...))
	}
	if len(e.Rules) == 0 {
		errs = append(errs, errors.New("egress has no rules: leave egress out for a profile without network"))
	}
	seen := map[string]bool{}
	for i, r := range e.Rules {
		if seen[r.Host] {
			bad(i, "host %q appears twice", r.Host)
		}
		seen[r.Host] = true
		for _, err := range r.problems() {
			bad(i, "%w", err)
		}
	}
	l := e.Limits
	if l.MaxConnections < 0 || l.MaxBytesIn < 0 || l.MaxBytesOut < 0 {
		errs = append(errs, errors.New("egress limits must not be negative"))
	}
	return errors.Join(errs...)
}

func checkEgress(c Config) error {
	var errs []error
	for _, name := range c.ProfileNames() {
		if err := c.Profiles[name].Egress.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("profile %q: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// problems lists what is wrong with one rule on its own.
func (r EgressRule) problems() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := checkHostPattern(r.Host); err != nil {
		errs = append(errs, err)
	}
	for _, p := range r.Ports {
		if p < 1 || p > 65535 {
			bad("port %d is not in 1..65535", p)
		}
	}
	for _, a := range r.Resolve {
		if _, err := netip.ParseAddr(a); err != nil {
			bad("resolve %q is not an IP address", a)
		}
	}
	switch r.Upstream {
	case "", UpstreamHTTPS:
	default:
		bad("upstream %q is not \"https\" or empty", r.Upstream)
	}
	if r.Upstream == UpstreamHTTPS && strings.HasPrefix(r.Host, "*.") {
		bad("upstream \"https\" needs an exact host, not %q: the gateway verifies the upstream's certificate for that one name", r.Host)
	}
	if len(r.Inject) > 0 && r.Upstream != UpstreamHTTPS {
		bad("inject needs upstream \"https\": the gateway adds headers only to requests it sends over TLS itself, and never to an end-to-end tunnel")
	}
	for _, in := range r.Inject {
		switch {
		case !validHeaderName(in.Header):
			bad("inject header %q is not a header name", in.Header)
		case slices.Contains(framingHeaders, strings.ToLower(in.Header)):
			bad("inject header %q is one the gateway controls", in.Header)
		}
		switch {
		case (in.File == "") == (in.Env == ""):
			bad("inject %q needs exactly one of file or env", in.Header)
		case in.File != "" && (!path.IsAbs(in.File) || path.Clean(in.File) != in.File):
			bad("inject %q: file %q must be a clean absolute path", in.Header, in.File)
		}
		if strings.ContainsAny(in.Prefix, "\r\n") {
			bad("inject %q: prefix holds a line break", in.Header)
		}
	}
	return errs
}

// egressLines checks every profile's egress rules the way Validate does,
// but names the line of data (the config file) where each bad rule's
// host stands, so an operator goes straight to it.
func egressLines(data []byte, c Config) error {
	var errs []error
	for _, name := range c.ProfileNames() {
		e := c.Profiles[name].Egress
		if e == nil {
			continue
		}
		for i, r := range e.Rules {
			for _, err := range r.problems() {
				errs = append(errs, fmt.Errorf("%w: line %d: profile %q: egress rule %d: %w", ErrInvalid, lineOfString(data, r.Host), name, i, err))
			}
		}
	}
	return errors.Join(errs...)
}

// lineOfString returns the line of the first JSON string in data equal
// to s ("host": "*.bad*"), or 0 if there is none.
func lineOfString(data []byte, s string) int {
	q, _ := json.Marshal(s)
	off := bytes.Index(data, q)
	if off < 0 {
		return 0
	}
	return 1 + bytes.Count(data[:off], []byte("\n"))
}
