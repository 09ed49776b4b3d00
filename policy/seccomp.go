package policy

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Action is what the kernel does when a seccomp rule matches. Only the
// actions pyjail uses are defined; package jail maps them to libcontainer's.
type Action string

// Seccomp actions.
const (
	// ActAllow lets the system call through.
	ActAllow Action = "allow"
	// ActErrno fails the system call with the rule's errno (EPERM by
	// default). This is the default action: a program that probes an
	// unlisted syscall gets a clean error rather than dying.
	ActErrno Action = "errno"
	// ActKillProcess kills the whole process with SIGSYS.
	ActKillProcess Action = "kill_process"
)

// Op compares a system call argument with a rule's value.
type Op string

// Argument comparison operators, as libseccomp defines them.
const (
	OpEqual        Op = "=="
	OpNotEqual     Op = "!="
	OpLess         Op = "<"
	OpLessEqual    Op = "<="
	OpGreater      Op = ">"
	OpGreaterEqual Op = ">="
	// OpMaskedEqual matches when (arg & Value) == ValueTwo.
	OpMaskedEqual Op = "&=="
)

// Arg restricts one system call argument. All Args of a rule must match.
type Arg struct {
	Index    uint   `json:"index"`
	Op       Op     `json:"op"`
	Value    uint64 `json:"value"`
	ValueTwo uint64 `json:"value_two,omitempty"`
}

// Rule is one line of the seccomp table: the named system calls (libseccomp
// names, resolved per architecture by libcontainer) get Action when Args
// match. Why is mandatory: every allowed syscall carries its reason.
type Rule struct {
	Names  []string `json:"names"`
	Action Action   `json:"action"`
	// Errno is the error returned for ActErrno; 0 means EPERM.
	Errno uint   `json:"errno,omitempty"`
	Args  []Arg  `json:"args,omitempty"`
	Why   string `json:"why"`
}

// Seccomp is a complete filter: a default action for everything not listed,
// the architectures it covers, and the rules.
type Seccomp struct {
	DefaultAction Action `json:"default_action"`
	// DefaultErrno is the errno of a default ActErrno; 0 means EPERM.
	DefaultErrno uint `json:"default_errno,omitempty"`
	// Architectures lists libseccomp architecture names (e.g. "amd64").
	// Only the native one is listed: foreign-ABI calls hit the bad-arch
	// action, which kills.
	Architectures []string `json:"architectures"`
	Rules         []Rule   `json:"rules"`
}

// SeccompOptions selects the named relaxations merged into the base
// allowlist. The zero value is the strictest filter; every field that
// relaxes it adds a line to SeccompWarnings.
type SeccompOptions struct {
	// Landlock allows the landlock_* system calls so the runner can confine
	// itself further. They can only reduce privilege.
	Landlock bool `json:"landlock"`
	// Egress allows TCP sockets (AF_INET and AF_INET6, SOCK_STREAM
	// only) for a profile with an egress section. It is never read from
	// the config file: package jail sets it per profile (ForProfile), and
	// without it every inet socket is refused with EAFNOSUPPORT.
	Egress bool `json:"-"`
}

// ForProfile returns opt with the per-profile options set from p: Egress
// when p has an egress section.
func (opt SeccompOptions) ForProfile(p Profile) SeccompOptions {
	opt.Egress = p.Egress != nil
	return opt
}

// Errno values the filter returns. They are the asm-generic numbers, which
// amd64 and arm64 share.
const (
	// ErrnoEPERM is what a denied system call returns: programs treat it as
	// "not allowed here" and usually carry on.
	ErrnoEPERM uint = 1
	// ErrnoENOSYS makes a caller believe the kernel lacks the system call,
	// so that libc falls back to an older one the filter can inspect.
	ErrnoENOSYS uint = 38
	// ErrnoEAFNOSUPPORT refuses an inet socket in a profile without
	// egress: "Address family not supported by protocol".
	ErrnoEAFNOSUPPORT uint = 97
)

// SeccompFilter returns the complete filter for opt: the base allowlist, the
// native architecture's rules and every relaxation opt selects, sorted by the
// first name of each rule. It returns a fresh value on every call; callers
// may modify it.
func SeccompFilter(opt SeccompOptions) Seccomp {
	rules := baseRules()
	rules = append(rules, archRules()...)
	if !opt.Egress {
		rules = append(rules, inetRefusedRules()...)
	}
	for _, r := range relaxations() {
		if r.enabled(opt) {
			rules = append(rules, r.rules()...)
		}
	}
	// Stable, so that several rules for one name (socket, per family)
	// keep the order in which the table lists them.
	slices.SortStableFunc(rules, func(a, b Rule) int { return strings.Compare(a.Names[0], b.Names[0]) })
	return Seccomp{
		DefaultAction: ActErrno,
		DefaultErrno:  ErrnoEPERM,
		Architectures: []string{nativeArch()},
		Rules:         rules,
	}
}

// SeccompWarnings returns one line per relaxation opt selects, for the
// server to log at startup. It is empty for the zero SeccompOptions.
func SeccompWarnings(opt SeccompOptions) []string {
	var lines []string
	for _, r := range relaxations() {
		if r.enabled(opt) {
			lines = append(lines, "seccomp relaxation "+r.name+": "+r.warning)
		}
	}
	return lines
}

// relaxation is a named set of rules merged into the base allowlist when an
// option asks for it, in the manner of gVisor's Rules(opt).
type relaxation struct {
	name    string
	enabled func(SeccompOptions) bool
	rules   func() []Rule
	warning string
}

// relaxations lists every relaxation. Each SeccompOptions field has exactly
// one entry here; a test holds the two in step.
func relaxations() []relaxation {
	return []relaxation{
		{
			name:    "landlock",
			enabled: func(o SeccompOptions) bool { return o.Landlock },
			rules:   landlockRules,
			warning: "landlock_create_ruleset, landlock_add_rule and landlock_restrict_self are allowed so the runner can confine itself further; they can only drop access but add kernel code reachable from the jail",
		},
		{
			name:    "egress",
			enabled: func(o SeccompOptions) bool { return o.Egress },
			rules:   egressRules,
			warning: "TCP sockets (AF_INET, AF_INET6, SOCK_STREAM) are allowed in this profile so its code can reach the egress gateway on its loopback; UDP and raw sockets stay refused",
		},
	}
}

// Validate checks that s is a well-formed filter: a default action that is
// not allow, at least one architecture, and rules that package jail can
// convert without changing their meaning. It joins all failures.
func (s Seccomp) Validate() error {
	checks := []struct {
		name string
		fn   func(Seccomp) error
	}{
		{"default action", checkSeccompDefault},
		{"architectures", checkSeccompArchs},
		{"rules", checkSeccompRules},
		{"duplicate names", checkSeccompDuplicates},
	}
	var errs []error
	for _, c := range checks {
		if err := c.fn(s); err != nil {
			errs = append(errs, fmt.Errorf("%w: seccomp %s: %w", ErrInvalid, c.name, err))
		}
	}
	return errors.Join(errs...)
}

func checkSeccompDefault(s Seccomp) error {
	switch s.DefaultAction {
	case ActErrno, ActKillProcess:
	case ActAllow:
		return errors.New("the default action must never be allow")
	default:
		return fmt.Errorf("unknown action %q", s.DefaultAction)
	}
	if s.DefaultErrno != 0 && s.DefaultAction != ActErrno {
		return fmt.Errorf("default errno %d set for action %q", s.DefaultErrno, s.DefaultAction)
	}
	return nil
}

func checkSeccompArchs(s Seccomp) error {
	if len(s.Architectures) == 0 {
		return errors.New("no architecture listed")
	}
	for _, a := range s.Architectures {
		if !isIdent(a) {
			return fmt.Errorf("architecture %q is not a libseccomp name", a)
		}
	}
	return nil
}

// maxSyscallArgs is the number of arguments seccomp can inspect.
const maxSyscallArgs = 6

func checkSeccompRules(s Seccomp) error {
	var errs []error
	for i, r := range s.Rules {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("rule %d %v: "+format, append([]any{i, r.Names}, args...)...))
		}
		if len(r.Names) == 0 {
			bad("no system call names")
		}
		for _, n := range r.Names {
			if !isIdent(n) {
				bad("name %q is not a lowercase libseccomp name", n)
			}
		}
		if strings.TrimSpace(r.Why) == "" {
			bad("no reason given (Why)")
		}
		switch r.Action {
		case ActAllow, ActKillProcess:
			if r.Errno != 0 {
				bad("errno %d set for action %q", r.Errno, r.Action)
			}
		case ActErrno:
		default:
			bad("unknown action %q", r.Action)
		}
		seen := map[uint]bool{}
		for _, a := range r.Args {
			if a.Index >= maxSyscallArgs {
				bad("argument index %d out of range", a.Index)
			}
			// libcontainer turns two conditions on one argument into two
			// separate rules, i.e. an OR, while Arg promises AND. Refuse
			// rather than silently widen the rule.
			if seen[a.Index] {
				bad("two conditions on argument %d", a.Index)
			}
			seen[a.Index] = true
			if !knownOp(a.Op) {
				bad("unknown operator %q", a.Op)
			}
		}
	}
	return errors.Join(errs...)
}

// checkSeccompDuplicates refuses a name that has an unconditional rule and
// any other rule: one of the two would be dead or would contradict the
// other. Several conditional rules for one name are alternatives (OR) and
// are fine.
func checkSeccompDuplicates(s Seccomp) error {
	count := map[string]int{}
	uncond := map[string]bool{}
	for _, r := range s.Rules {
		for _, n := range r.Names {
			count[n]++
			if len(r.Args) == 0 {
				uncond[n] = true
			}
		}
	}
	var errs []error
	for _, n := range slices.Sorted(maps.Keys(count)) {
		if count[n] > 1 && uncond[n] {
			errs = append(errs, fmt.Errorf("%q has an unconditional rule and %d rules in all", n, count[n]))
		}
	}
	return errors.Join(errs...)
}

func knownOp(op Op) bool {
	switch op {
	case OpEqual, OpNotEqual, OpLess, OpLessEqual, OpGreater, OpGreaterEqual, OpMaskedEqual:
		return true
	}
	return false
}

// isIdent reports whether s looks like a libseccomp syscall or architecture
// name: lowercase letters, digits and underscores, not starting with a digit.
func isIdent(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, c := range []byte(s) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}
