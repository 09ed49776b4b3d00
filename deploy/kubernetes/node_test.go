package kubernetes

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/opencontainers/runtime-spec/specs-go"
	nodev1 "k8s.io/api/node/v1"

	"github.com/pyjail/pyjail/policy"
)

const (
	seccompFile  = "node/seccomp-pyjail.json"
	apparmorFile = "node/apparmor-pyjail"
	// arm64Golden is the jail filter on arm64, which a test on amd64
	// cannot build with policy.SeccompFilter.
	arm64Golden = "../../policy/testdata/default_arm64.golden"
)

// seccompProfile is the OCI runtime-spec LinuxSeccomp, which containerd
// decodes a localhost profile into, plus the per-rule "comment" of moby's
// and CRI-O's format (containerd ignores it). Decoding into it strictly
// catches a misspelt key, which the runtimes would silently drop.
type seccompProfile struct {
	DefaultAction   specs.LinuxSeccompAction `json:"defaultAction"`
	DefaultErrnoRet *uint                    `json:"defaultErrnoRet,omitempty"`
	Architectures   []specs.Arch             `json:"architectures"`
	Syscalls        []seccompRule            `json:"syscalls"`
}

type seccompRule struct {
	Names    []string                 `json:"names"`
	Action   specs.LinuxSeccompAction `json:"action"`
	ErrnoRet *uint                    `json:"errnoRet,omitempty"`
	Args     []specs.LinuxSeccompArg  `json:"args,omitempty"`
	Comment  string                   `json:"comment"`
}

// neverAllowed are calls pyjail never makes and that widen what a process
// can reach beyond its namespaces: kernel code and memory, other
// processes' memory, keys, clocks, devices. The profile must refuse them
// with any argument.
var neverAllowed = []string{
	"acct", "add_key", "adjtimex", "bpf", "chroot", "clock_adjtime", "clock_settime", "delete_module",
	"fanotify_init", "finit_module", "init_module", "io_uring_enter", "io_uring_register", "io_uring_setup",
	"ioperm", "iopl", "kcmp", "kexec_file_load", "kexec_load", "lookup_dcookie", "name_to_handle_at",
	"open_by_handle_at", "perf_event_open", "personality", "pidfd_getfd", "process_madvise",
	"process_vm_readv", "process_vm_writev", "ptrace", "quotactl", "reboot", "request_key",
	"setdomainname", "settimeofday", "swapoff", "swapon", "syslog", "userfaultfd", "vhangup",
}

func loadProfile(t *testing.T) seccompProfile {
	t.Helper()
	b, err := os.ReadFile(seccompFile)
	if err != nil {
		t.Fatal(err)
	}
	var p seccompProfile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("%s: %v", seccompFile, err)
	}
	// What containerd sees: the same rules, comments dropped.
	var oci specs.LinuxSeccomp
	if err := json.Unmarshal(b, &oci); err != nil {
		t.Fatalf("%s as runtime-spec: %v", seccompFile, err)
	}
	if len(oci.Syscalls) != len(p.Syscalls) {
		t.Fatalf("runtime-spec decoding sees %d rules, the profile has %d", len(oci.Syscalls), len(p.Syscalls))
	}
	return p
}

// allows reports whether the profile allows name when the arguments match
// args: unconditionally, or by a rule with exactly those conditions.
func (p seccompProfile) allows(name string, args []specs.LinuxSeccompArg) bool {
	for _, r := range p.Syscalls {
		if r.Action != specs.ActAllow || !slices.Contains(r.Names, name) {
			continue
		}
		if len(r.Args) == 0 || slices.Equal(r.Args, args) {
			return true
		}
	}
	return false
}

// errno returns the errno a rule sets for name, if any rule does.
func (p seccompProfile) errno(name string) (uint, bool) {
	for _, r := range p.Syscalls {
		if r.Action == specs.ActErrno && slices.Contains(r.Names, name) && r.ErrnoRet != nil {
			return *r.ErrnoRet, true
		}
	}
	return 0, false
}

func TestSeccompProfileShape(t *testing.T) {
	p := loadProfile(t)
	if p.DefaultAction != specs.ActErrno || p.DefaultErrnoRet == nil || *p.DefaultErrnoRet != policy.ErrnoEPERM {
		t.Errorf("default %s/%v, want SCMP_ACT_ERRNO with EPERM: never allow", p.DefaultAction, p.DefaultErrnoRet)
	}
	if want := []specs.Arch{specs.ArchX86_64, specs.ArchAARCH64}; !slices.Equal(p.Architectures, want) {
		t.Errorf("architectures %v, want %v: native ABIs only", p.Architectures, want)
	}
	unconditional := map[string]bool{}
	conditional := map[string]bool{}
	for i, r := range p.Syscalls {
		if strings.TrimSpace(r.Comment) == "" {
			t.Errorf("rule %d (%v) has no comment saying why", i, r.Names)
		}
		if !slices.IsSorted(r.Names) || len(slices.Compact(slices.Clone(r.Names))) != len(r.Names) {
			t.Errorf("rule %d: names not sorted or repeated", i)
		}
		for _, n := range r.Names {
			switch {
			case r.Action != specs.ActAllow || len(r.Args) > 0:
				conditional[n] = true
			case unconditional[n]:
				t.Errorf("%s allowed by two rules", n)
			default:
				unconditional[n] = true
			}
		}
	}
	for n := range conditional {
		if unconditional[n] {
			t.Errorf("%s has argument conditions and is also allowed without any: the conditions do nothing", n)
		}
	}
	for _, n := range neverAllowed {
		if unconditional[n] || conditional[n] && p.allowsAny(n) {
			t.Errorf("%s is allowed; pyjail never needs it", n)
		}
	}
}

func (p seccompProfile) allowsAny(name string) bool {
	for _, r := range p.Syscalls {
		if r.Action == specs.ActAllow && slices.Contains(r.Names, name) {
			return true
		}
	}
	return false
}

// TestSeccompProfileCoversTheJails checks the pod's profile allows every
// call the jail and fork-server filters allow, under their conditions or
// more loosely, and returns the same errno where they do unless it allows
// the call (then the jail's own errno is what code sees: of two stacked
// filters the error wins over the allow): jails run under both filters,
// so anything missing here would break code the jail policy lets through.
func TestSeccompProfileCoversTheJails(t *testing.T) {
	p := loadProfile(t)
	opt := loadConfig(t).Seccomp
	for name, filter := range map[string]policy.Seccomp{
		"jail":        policy.SeccompFilter(opt),
		"fork server": policy.ForkServerSeccompFilter(opt),
	} {
		for _, r := range filter.Rules {
			args := ociArgs(t, r.Args)
			for _, n := range r.Names {
				switch r.Action {
				case policy.ActAllow:
					if !p.allows(n, args) {
						t.Errorf("%s filter allows %s %v; the pod's profile does not", name, n, r.Args)
					}
				case policy.ActErrno:
					if p.allows(n, args) {
						// The pod lets the call through (the server needs
						// it: socket for its listener), and the jail's own
						// filter, stacked below, answers with its errno.
						continue
					}
					want := r.Errno
					if want == 0 {
						want = policy.ErrnoEPERM
					}
					if got, ok := p.errno(n); !ok && want != policy.ErrnoEPERM || ok && got != want {
						t.Errorf("%s filter returns errno %d for %s; the pod's profile %d", name, want, n, got)
					}
				}
			}
		}
	}
	for _, n := range arm64AllowedNames(t) {
		if !p.allowsAny(n) {
			t.Errorf("the arm64 jail filter allows %s; the pod's profile does not", n)
		}
	}
}

// TestSeccompProfileBuildsJails checks what pyjail's own filters do not
// show: the calls runc's init makes while it builds a container, seen with
// strace on this project's runs (README.md, "What was tested here").
func TestSeccompProfileBuildsJails(t *testing.T) {
	p := loadProfile(t)
	for _, n := range []string{
		"clone", "fsconfig", "fsmount", "fsopen", "memfd_create", "mount", "open_tree", "pivot_root",
		"prlimit64", "sched_setaffinity", "seccomp", "setgid", "sethostname", "setns", "setuid", "umount2", "unshare",
	} {
		if !p.allows(n, nil) {
			t.Errorf("%s is not allowed unconditionally; runc's init needs it", n)
		}
	}
	for _, c := range []struct {
		name string
		args []specs.LinuxSeccompArg
	}{
		{"keyctl", []specs.LinuxSeccompArg{{Index: 0, Value: 1, Op: specs.OpEqualTo}}},                                 // KEYCTL_JOIN_SESSION_KEYRING
		{"mknodat", []specs.LinuxSeccompArg{{Index: 2, Value: 0o170000, ValueTwo: 0o010000, Op: specs.OpMaskedEqual}}}, // the exec fifo
		{"socket", []specs.LinuxSeccompArg{{Index: 0, Value: 16, Op: specs.OpEqualTo}}},                                // AF_NETLINK, loopback setup
	} {
		if !p.allows(c.name, c.args) {
			t.Errorf("%s %v is not allowed; runc's init needs it", c.name, c.args)
		}
	}
}

// ociArgs converts the policy's argument conditions to runtime-spec's.
func ociArgs(t *testing.T, args []policy.Arg) []specs.LinuxSeccompArg {
	t.Helper()
	ops := map[policy.Op]specs.LinuxSeccompOperator{
		policy.OpEqual: specs.OpEqualTo, policy.OpNotEqual: specs.OpNotEqual,
		policy.OpLess: specs.OpLessThan, policy.OpLessEqual: specs.OpLessEqual,
		policy.OpGreater: specs.OpGreaterThan, policy.OpGreaterEqual: specs.OpGreaterEqual,
		policy.OpMaskedEqual: specs.OpMaskedEqual,
	}
	var out []specs.LinuxSeccompArg
	for _, a := range args {
		op, ok := ops[a.Op]
		if !ok {
			t.Fatalf("no runtime-spec operator for %q", a.Op)
		}
		out = append(out, specs.LinuxSeccompArg{Index: a.Index, Value: a.Value, ValueTwo: a.ValueTwo, Op: op})
	}
	return out
}

// arm64AllowedNames reads the names the arm64 jail filter allows from its
// golden dump (policy/testdata), one "allow NAMES [CONDITION] # why" line
// per rule.
func arm64AllowedNames(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(arm64Golden)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "allow" {
			names = append(names, strings.Split(fields[1], ",")...)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(names) < 100 {
		t.Fatalf("read only %d names from %s; has its format changed?", len(names), arm64Golden)
	}
	return names
}

// TestAppArmorProfile checks the profile the pod names exists under that
// name and grants what the runtime default withholds from jail building.
func TestAppArmorProfile(t *testing.T) {
	b, err := os.ReadFile(apparmorFile)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^profile (\S+) flags=`).FindSubmatch(b)
	if m == nil || string(m[1]) != apparmorName {
		t.Fatalf("%s does not define profile %q", apparmorFile, apparmorName)
	}
	rules := map[string]bool{}
	for l := range strings.Lines(string(b)) {
		rules[strings.TrimSpace(l)] = true
	}
	for _, r := range []string{"userns,", "mount,", "umount,", "pivot_root,", "signal (send, receive) peer=pyjail,"} {
		if !rules[r] {
			t.Errorf("%s lacks %q", apparmorFile, r)
		}
	}
	for r := range rules {
		if strings.HasPrefix(r, "deny") && (strings.Contains(r, "mount") || strings.Contains(r, "userns") || strings.Contains(r, "pivot_root")) {
			t.Errorf("%s denies what jails need: %q", apparmorFile, r)
		}
	}
}

// TestNodeRuntimeHandlers checks the runtime handler snippets define the
// handler the RuntimeClass names, with a writable cgroup.
func TestNodeRuntimeHandlers(t *testing.T) {
	d := baseDeployment(t)
	rc := find[*nodev1.RuntimeClass](t, loadTree(t, baseDir).objects, *d.Spec.Template.Spec.RuntimeClassName)
	handler := rc.Handler
	for file, want := range map[string][]string{
		"node/containerd-pyjail.toml": {"containerd.runtimes." + handler + "]", "cgroup_writable = true", "SystemdCgroup = true"},
		"node/crio-pyjail.conf":       {"[crio.runtime.runtimes." + handler + "]", criOAnnotation},
	} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !bytes.Contains(b, []byte(w)) {
				t.Errorf("%s lacks %q", file, w)
			}
		}
	}
	if got := d.Spec.Template.Annotations[criOAnnotation]; got != "true" {
		t.Errorf("pod annotation %s = %q, want \"true\"", criOAnnotation, got)
	}
}

const criOAnnotation = "io.kubernetes.cri-o.cgroup2-mount-hierarchy-rw"

// TestReadmeNamesTheNodePaths keeps the operator docs and the manifests in
// step on where the node files go.
func TestReadmeNamesTheNodePaths(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"/var/lib/kubelet/seccomp/" + seccompPath, seccompFile, apparmorFile, "apparmor_parser"} {
		if !bytes.Contains(b, []byte(w)) {
			t.Errorf("README.md does not mention %q", w)
		}
	}
}
