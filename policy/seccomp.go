package policy

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
}
