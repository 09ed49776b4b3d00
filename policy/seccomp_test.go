package policy

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pyjail/pyjail/record"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/*.golden from the current policy")

// forbidden lists system calls that no SeccompOptions combination may ever
// allow: they create namespaces or mounts, reach other processes' memory,
// load kernel code, change host-wide state, or hand out kernel interfaces
// with a long record of privilege escalations. The list is the test's own,
// deliberately not shared with the table it checks.
var forbidden = []string{
	"_sysctl", "acct", "add_key", "adjtimex", "bpf", "chroot", "clock_adjtime", "clock_settime",
	"clone3", "create_module", "delete_module", "finit_module", "fsconfig", "fsmount", "fsopen",
	"fspick", "get_kernel_syms", "init_module", "io_uring_enter", "io_uring_register",
	"io_uring_setup", "ioperm", "iopl", "kcmp", "kexec_file_load", "kexec_load", "keyctl",
	"lookup_dcookie", "modify_ldt", "mount", "mount_setattr", "move_mount", "name_to_handle_at",
	"nfsservctl", "open_by_handle_at", "open_tree", "perf_event_open", "personality",
	"pidfd_getfd", "pivot_root", "process_vm_readv", "process_vm_writev", "ptrace",
	"query_module", "quotactl", "quotactl_fd", "reboot", "request_key", "setdomainname",
	"sethostname", "setns", "settimeofday", "swapoff", "swapon", "syslog", "sysfs", "umount",
	"umount2", "unshare", "uselib", "userfaultfd", "ustat", "vhangup", "vm86", "vm86old",
}

// cloneNewFlags are the CLONE_NEW* bits, written out independently of the
// table's own constant.
var cloneNewFlags = map[string]uint64{
	"CLONE_NEWTIME":   0x00000080,
	"CLONE_NEWNS":     0x00020000,
	"CLONE_NEWCGROUP": 0x02000000,
	"CLONE_NEWUTS":    0x04000000,
	"CLONE_NEWIPC":    0x08000000,
	"CLONE_NEWUSER":   0x10000000,
	"CLONE_NEWPID":    0x20000000,
	"CLONE_NEWNET":    0x40000000,
}

// inetFamilies are the families only an egress profile may create, and
// then only as TCP sockets.
var inetFamilies = map[uint64]string{2: "AF_INET", 10: "AF_INET6"}

var syscallName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// allOptions enumerates every SeccompOptions value by setting each bool field
// on or off, so that a new option is covered without touching the tests.
func allOptions(t testing.TB) map[string]SeccompOptions {
	t.Helper()
	typ := reflect.TypeFor[SeccompOptions]()
	for i := range typ.NumField() {
		if typ.Field(i).Type.Kind() != reflect.Bool {
			t.Fatalf("SeccompOptions.%s is not a bool; extend allOptions to enumerate it", typ.Field(i).Name)
		}
	}
	out := map[string]SeccompOptions{}
	for bits := range uint64(1) << typ.NumField() {
		opt, name := optionsFromBits(bits)
		out[name] = opt
	}
	return out
}

// optionsFromBits sets field i of SeccompOptions from bit i of bits and
// names the result, e.g. "landlock=true".
func optionsFromBits(bits uint64) (SeccompOptions, string) {
	var opt SeccompOptions
	v := reflect.ValueOf(&opt).Elem()
	var parts []string
	for i := range v.NumField() {
		on := bits&(1<<i) != 0
		v.Field(i).SetBool(on)
		parts = append(parts, fmt.Sprintf("%s=%t", v.Type().Field(i).Name, on))
	}
	return opt, strings.Join(parts, ",")
}

func countTrue(opt SeccompOptions) int {
	v := reflect.ValueOf(opt)
	n := 0
	for i := range v.NumField() {
		if v.Field(i).Bool() {
			n++
		}
	}
	return n
}

// TestSeccompInvariants checks properties of the filter for every option
// combination, in the manner of gVisor's filter invariant tests.
func TestSeccompInvariants(t *testing.T) {
	for name, opt := range allOptions(t) {
		t.Run(name, func(t *testing.T) {
			s := SeccompFilter(opt)
			if err := s.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
			if got, want := s.DefaultAction, ActErrno; got != want {
				t.Errorf("default action = %q, want %q", got, want)
			}
			if s.DefaultErrno != 0 && s.DefaultErrno != ErrnoEPERM {
				t.Errorf("default errno = %d, want EPERM", s.DefaultErrno)
			}
			if got, want := s.Architectures, []string{nativeArch()}; !slices.Equal(got, want) {
				t.Errorf("architectures = %q, want %q", got, want)
			}
			if runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64" {
				if got, want := nativeArch(), runtime.GOARCH; got != want {
					t.Errorf("nativeArch() = %q, want %q", got, want)
				}
			}
			for _, r := range s.Rules {
				if strings.TrimSpace(r.Why) == "" {
					t.Errorf("rule %v has no Why", r.Names)
				}
				for _, n := range r.Names {
					if !syscallName.MatchString(n) {
						t.Errorf("rule %v: name %q is not a lowercase identifier", r.Names, n)
					}
				}
			}
			checkForbidden(t, s)
			checkClone(t, s)
			checkSetIDModes(t, s)
			checkSocket(t, s, opt.Egress)
			checkIoctl(t, s)
			checkNoDuplicates(t, s)
			if got, want := len(SeccompWarnings(opt)), countTrue(opt); got != want {
				t.Errorf("%d warnings for %d relaxations: %q", got, want, SeccompWarnings(opt))
			}
		})
	}
}

func allowRules(s Seccomp, name string) []Rule {
	var out []Rule
	for _, r := range s.Rules {
		if r.Action == ActAllow && slices.Contains(r.Names, name) {
			out = append(out, r)
		}
	}
	return out
}

func checkForbidden(t *testing.T, s Seccomp) {
	t.Helper()
	for _, name := range forbidden {
		for _, r := range allowRules(s, name) {
			t.Errorf("forbidden system call %q is allowed by rule %v (args %v)", name, r.Names, r.Args)
		}
	}
}

// checkSetIDModes requires every rule allowing a call that sets a file
// mode to refuse S_ISUID and S_ISGID in the mode argument (the argument's
// index per call), and openat2, whose mode seccomp cannot read, never to
// be allowed: with an idmapped workspace, a file the jail makes belongs on
// the host to the workspace's owner.
func checkSetIDModes(t *testing.T, s Seccomp) {
	t.Helper()
	for name, index := range map[string]uint{"fchmod": 1, "fchmodat": 2, "openat": 3, "chmod": 1, "creat": 1, "open": 2} {
		for _, r := range allowRules(s, name) {
			ok := false
			for _, a := range r.Args {
				ok = ok || (a.Index == index && a.Op == OpMaskedEqual && a.Value&setIDBits == setIDBits && a.ValueTwo&setIDBits == 0)
			}
			if !ok {
				t.Errorf("%s is allowed by rule %v without refusing setuid/setgid in argument %d (args %v)", name, r.Names, index, r.Args)
			}
		}
	}
	if rules := allowRules(s, "fchmodat2"); len(rules) > 0 {
		t.Errorf("fchmodat2 is allowed (%v); its mode would need the same check", rules[0].Names)
	}
	if rules := allowRules(s, "openat2"); len(rules) > 0 {
		t.Errorf("openat2 is allowed (%v); seccomp cannot read its mode", rules[0].Names)
	}
}

// checkClone requires every rule allowing clone to refuse each CLONE_NEW*
// bit: the flags word must be masked with the bit and compared with a value
// that lacks it.
func checkClone(t *testing.T, s Seccomp) {
	t.Helper()
	rules := allowRules(s, "clone")
	if len(rules) == 0 {
		t.Error("clone is not allowed at all; threads and fork would fail")
	}
	for _, r := range rules {
		var masked *Arg
		for i, a := range r.Args {
			if a.Index == 0 && a.Op == OpMaskedEqual {
				masked = &r.Args[i]
			}
		}
		if masked == nil {
			t.Errorf("clone allowed without a mask on its flags: %v", r.Args)
			continue
		}
		for flag, bit := range cloneNewFlags {
			if masked.Value&bit == 0 || masked.ValueTwo&bit != 0 {
				t.Errorf("clone rule %v lets %s through", r.Args, flag)
			}
		}
	}
}

func checkSocket(t *testing.T, s Seccomp, egress bool) {
	t.Helper()
	for _, r := range allowRules(s, "socketpair") {
		if len(r.Args) != 1 || r.Args[0] != (Arg{Index: 0, Op: OpEqual, Value: 1}) {
			t.Errorf("socketpair allowed for %v, want AF_UNIX only", r.Args)
		}
	}
	inet := 0
	for _, r := range allowRules(s, "socket") {
		if len(r.Args) == 0 || r.Args[0].Index != 0 || r.Args[0].Op != OpEqual {
			t.Errorf("socket allowed without an exact family: %v", r.Args)
			continue
		}
		fam := r.Args[0].Value
		if fam == 1 && len(r.Args) == 1 {
			continue // AF_UNIX
		}
		if _, ok := inetFamilies[fam]; !ok {
			t.Errorf("socket allowed for family %d (%v)", fam, r.Args)
			continue
		}
		inet++
		if !egress {
			t.Errorf("socket allowed for inet family %d without egress: %v", fam, r.Args)
			continue
		}
		// TCP only: the type, without its flag bits, is SOCK_STREAM and
		// the protocol is 0 or IPPROTO_TCP.
		tcp := len(r.Args) == 3 &&
			r.Args[1] == (Arg{Index: 1, Op: OpMaskedEqual, Value: 0xf, ValueTwo: 1}) &&
			r.Args[2].Index == 2 && r.Args[2].Op == OpEqual && (r.Args[2].Value == 0 || r.Args[2].Value == 6)
		if !tcp {
			t.Errorf("socket allowed for family %d beyond TCP: %v", fam, r.Args)
		}
	}
	if egress && inet != 4 {
		t.Errorf("egress allows %d inet socket rules, want 4 (two families, protocol 0 or TCP)", inet)
	}
	// Without egress, both inet families get EAFNOSUPPORT explicitly.
	refused := map[uint64]bool{}
	for _, r := range s.Rules {
		if slices.Contains(r.Names, "socket") && r.Action == ActErrno && r.Errno == ErrnoEAFNOSUPPORT && len(r.Args) == 1 {
			refused[r.Args[0].Value] = true
		}
	}
	if want := !egress; refused[2] != want || refused[10] != want {
		t.Errorf("egress=%t: AF_INET refused=%t, AF_INET6 refused=%t, want %t", egress, refused[2], refused[10], want)
	}
}

func checkIoctl(t *testing.T, s Seccomp) {
	t.Helper()
	const tiocsti = 0x5412
	for _, r := range allowRules(s, "ioctl") {
		ok := slices.ContainsFunc(r.Args, func(a Arg) bool {
			return a.Index == 1 && a.Op == OpNotEqual && a.Value == tiocsti
		})
		if !ok {
			t.Errorf("ioctl allowed without refusing TIOCSTI: %v", r.Args)
		}
	}
}

// checkNoDuplicates allows a name in several allow rules only when each of
// them is conditional (alternatives, such as socket per family).
func checkNoDuplicates(t *testing.T, s Seccomp) {
	t.Helper()
	rules := map[string][]Rule{}
	for _, r := range s.Rules {
		for _, n := range r.Names {
			rules[n] = append(rules[n], r)
		}
	}
	for n, rs := range rules {
		if len(rs) < 2 {
			continue
		}
		for _, r := range rs {
			if len(r.Args) == 0 {
				t.Errorf("%q is listed in %d rules, one of them unconditional", n, len(rs))
				break
			}
		}
		for i := range rs {
			for j := i + 1; j < len(rs); j++ {
				if reflect.DeepEqual(rs[i].Args, rs[j].Args) {
					t.Errorf("%q is listed twice with the same arguments %v", n, rs[i].Args)
				}
			}
		}
	}
}

// TestSeccompRelaxationsMatchOptions holds relaxations() and the fields of
// SeccompOptions in step: each field alone turns on exactly one relaxation,
// which adds rules and one warning.
func TestSeccompRelaxationsMatchOptions(t *testing.T) {
	typ := reflect.TypeFor[SeccompOptions]()
	if got, want := len(relaxations()), typ.NumField(); got != want {
		t.Fatalf("%d relaxations for %d SeccompOptions fields", got, want)
	}
	base := SeccompFilter(SeccompOptions{})
	if w := SeccompWarnings(SeccompOptions{}); len(w) != 0 {
		t.Errorf("zero options warn: %q", w)
	}
	for i := range typ.NumField() {
		opt, name := optionsFromBits(1 << i)
		t.Run(name, func(t *testing.T) {
			if got, want := len(SeccompWarnings(opt)), 1; got != want {
				t.Errorf("%d warnings, want %d", got, want)
			}
			if got := SeccompFilter(opt); len(got.Rules) <= len(base.Rules) {
				t.Errorf("%s adds no rules", typ.Field(i).Name)
			}
		})
	}
}

// TestSeccompTablesSorted reads the rule tables in the source, where
// reviewers see them: every []Rule literal in syscalls.go and the
// architecture files must list rules by first name and names in order.
func TestSeccompTablesSorted(t *testing.T) {
	files, err := filepath.Glob("policy_*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "syscalls.go")
	fset := token.NewFileSet()
	for _, file := range files {
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok || !isRuleSlice(lit.Type) {
				return true
			}
			var prev string
			for _, elt := range lit.Elts {
				names := literalNames(t, fset, elt)
				if len(names) == 0 {
					t.Errorf("%s: rule without a literal Names list", fset.Position(elt.Pos()))
					continue
				}
				if !slices.IsSorted(names) {
					t.Errorf("%s: names %q are not sorted", fset.Position(elt.Pos()), names)
				}
				if names[0] < prev {
					t.Errorf("%s: rule %q comes after %q; sort the table by first name", fset.Position(elt.Pos()), names[0], prev)
				}
				prev = names[0]
			}
			return false
		})
	}
	// The same, for the values the functions return.
	for name, rules := range map[string][]Rule{"base": baseRules(), "arch": archRules(), "landlock": landlockRules()} {
		if !slices.IsSortedFunc(rules, func(a, b Rule) int { return strings.Compare(a.Names[0], b.Names[0]) }) {
			t.Errorf("%s rules are not sorted by first name", name)
		}
	}
	s := SeccompFilter(SeccompOptions{Landlock: true})
	if !slices.IsSortedFunc(s.Rules, func(a, b Rule) int { return strings.Compare(a.Names[0], b.Names[0]) }) {
		t.Error("SeccompFilter rules are not sorted by first name")
	}
}

func isRuleSlice(e ast.Expr) bool {
	arr, ok := e.(*ast.ArrayType)
	if !ok || arr.Len != nil {
		return false
	}
	id, ok := arr.Elt.(*ast.Ident)
	return ok && id.Name == "Rule"
}

// literalNames returns the string literals of a rule literal's Names field.
func literalNames(t *testing.T, fset *token.FileSet, elt ast.Expr) []string {
	t.Helper()
	lit, ok := elt.(*ast.CompositeLit)
	if !ok {
		return nil
	}
	for _, e := range lit.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok || kv.Key.(*ast.Ident).Name != "Names" {
			continue
		}
		list, ok := kv.Value.(*ast.CompositeLit)
		if !ok {
			return nil
		}
		var names []string
		for _, n := range list.Elts {
			bl, ok := n.(*ast.BasicLit)
			if !ok || bl.Kind != token.STRING {
				t.Errorf("%s: Names must be string literals", fset.Position(n.Pos()))
				return nil
			}
			s, err := strconv.Unquote(bl.Value)
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, s)
		}
		return names
	}
	return nil
}

func TestSeccompValidateRejects(t *testing.T) {
	good := func() Seccomp {
		return Seccomp{
			DefaultAction: ActErrno,
			Architectures: []string{"amd64"},
			Rules:         []Rule{{Names: []string{"read"}, Action: ActAllow, Why: "reading"}},
		}
	}
	if err := good().Validate(); err != nil {
		t.Fatalf("good filter: %v", err)
	}
	for name, tc := range map[string]struct {
		mutate func(*Seccomp)
		want   string
	}{
		"default allow":   {func(s *Seccomp) { s.DefaultAction = ActAllow }, "never be allow"},
		"default unknown": {func(s *Seccomp) { s.DefaultAction = "trace" }, "unknown action"},
		"no arch":         {func(s *Seccomp) { s.Architectures = nil }, "no architecture"},
		"no why":          {func(s *Seccomp) { s.Rules[0].Why = " " }, "no reason"},
		"no names":        {func(s *Seccomp) { s.Rules[0].Names = nil }, "no system call names"},
		"upper name":      {func(s *Seccomp) { s.Rules[0].Names = []string{"Read"} }, "not a lowercase"},
		"bad action":      {func(s *Seccomp) { s.Rules[0].Action = "log" }, "unknown action"},
		"errno on allow":  {func(s *Seccomp) { s.Rules[0].Errno = 38 }, "errno 38 set"},
		"bad op": {func(s *Seccomp) {
			s.Rules[0].Args = []Arg{{Index: 0, Op: "~"}}
		}, "unknown operator"},
		"arg index": {func(s *Seccomp) {
			s.Rules[0].Args = []Arg{{Index: 6, Op: OpEqual}}
		}, "out of range"},
		"same arg twice": {func(s *Seccomp) {
			s.Rules[0].Args = []Arg{{Index: 1, Op: OpNotEqual, Value: 1}, {Index: 1, Op: OpNotEqual, Value: 2}}
		}, "two conditions on argument 1"},
		"duplicate": {func(s *Seccomp) {
			s.Rules = append(s.Rules, Rule{Names: []string{"read"}, Action: ActAllow, Why: "again", Args: []Arg{{Op: OpEqual}}})
		}, "unconditional rule"},
	} {
		t.Run(name, func(t *testing.T) {
			s := good()
			tc.mutate(&s)
			err := s.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// goldenPath is the golden dump for this architecture. default.golden is
// recorded on amd64; other architectures keep their own next to it.
func goldenPath() string {
	if runtime.GOARCH == "amd64" {
		return filepath.Join("testdata", "default.golden")
	}
	return filepath.Join("testdata", "default_"+runtime.GOARCH+".golden")
}

// TestSeccompGolden compares the rendered default filter with its golden
// copy; `go test ./policy -run Golden -update` rewrites it.
func TestSeccompGolden(t *testing.T) {
	got := SeccompFilter(Default().Seccomp).Render()
	path := goldenPath()
	if *updateGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && runtime.GOARCH != "amd64" {
		t.Skipf("no golden dump for %s yet; record one with -update", runtime.GOARCH)
	}
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("rendered filter differs from %s (rerun with -update and review the diff):\n%s", path, lineDiff(string(want), got))
	}
}

// TestSeccompEgressGolden is TestSeccompGolden for a profile with egress:
// the same filter but TCP sockets.
func TestSeccompEgressGolden(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("recorded on amd64")
	}
	opt := Default().Seccomp
	opt.Egress = true
	got := SeccompFilter(opt).Render()
	path := filepath.Join("testdata", "egress.golden")
	if *updateGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("rendered filter differs from %s (rerun with -update and review the diff):\n%s", path, lineDiff(string(want), got))
	}
}

// TestSeccompEgressNotInConfig: the egress option is set per profile by
// package jail, never by the config file's seccomp section.
func TestSeccompEgressNotInConfig(t *testing.T) {
	b, err := json.Marshal(SeccompOptions{Landlock: true, Egress: true})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "gress") {
		t.Errorf("SeccompOptions marshals its per-profile field: %s", b)
	}
	p := Default().Profiles[record.ProfileCalc]
	if (SeccompOptions{}).ForProfile(p).Egress {
		t.Error("ForProfile of the default calc profile (no egress) sets Egress")
	}
	p.Egress = &Egress{}
	if !(SeccompOptions{}).ForProfile(p).Egress {
		t.Error("ForProfile of a profile with egress leaves Egress off")
	}
}

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range wl {
		if !slices.Contains(gl, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range gl {
		if !slices.Contains(wl, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

func TestRenderLines(t *testing.T) {
	s := Seccomp{
		DefaultAction: ActErrno,
		Architectures: []string{"arm64"},
		Rules: []Rule{
			{Names: []string{"clone"}, Action: ActAllow, Args: []Arg{{Index: 0, Op: OpMaskedEqual, Value: 0x20000, ValueTwo: 0}}, Why: "w"},
			{Names: []string{"clone3"}, Action: ActErrno, Errno: ErrnoENOSYS, Why: "x\ny"},
			{Names: []string{"a", "b"}, Action: ActKillProcess, Args: []Arg{{Index: 1, Op: OpNotEqual, Value: 5}}, Why: "z"},
		},
	}
	want := "default errno(EPERM)\n" +
		"arch arm64\n" +
		"allow         clone  arg0&0x20000==0x0  # w\n" +
		"errno(ENOSYS) clone3  # \"x\\ny\"\n" +
		"kill_process  a,b  arg1!=0x5  # z\n"
	if got := s.Render(); got != want {
		t.Errorf("Render() =\n%s\nwant\n%s", got, want)
	}
}

// renderSeed is one input of FuzzRender: option bits plus one extra rule
// built from arbitrary text and numbers.
type renderSeed struct {
	bits   uint64
	name   string
	why    string
	op     string
	value  uint64
	errno  uint64
	action string
}

// renderSeeds is the static corpus shared by FuzzRender and its twin
// TestRenderCorpus, so that plain `go test` covers it.
func renderSeeds() []renderSeed {
	return []renderSeed{
		{0, "read", "plain", "==", 0, 0, "allow"},
		{1, "clone", "mask", "&==", 0x7e020080, 0, "allow"},
		{3, "clone3", "enosys", "!=", 0, 38, "errno"},
		{0, "evil\nallow ptrace", "line\nbreak", "<", 1 << 63, 0, "allow"},
		{^uint64(0), "", "", "", 0, 1, "kill_process"},
		{2, "x", "\u2028unicode separator\x00", "?", 7, 99, "bogus"},
	}
}

// checkRender holds the properties of Render for one input: it never panics,
// is deterministic, writes exactly one line per rule after two header
// lines, and never lets a field break a line.
func checkRender(t *testing.T, in renderSeed) {
	t.Helper()
	opt, _ := optionsFromBits(in.bits & (1<<reflect.TypeFor[SeccompOptions]().NumField() - 1))
	s := SeccompFilter(opt)
	if err := s.Validate(); err != nil {
		t.Fatalf("SeccompFilter(%+v) is invalid: %v", opt, err)
	}
	s.Rules = append(s.Rules, Rule{
		Names:  []string{in.name},
		Action: Action(in.action),
		Errno:  uint(in.errno),
		Args:   []Arg{{Index: uint(in.value % 8), Op: Op(in.op), Value: in.value, ValueTwo: in.errno}},
		Why:    in.why,
	})
	out := s.Render()
	if out != s.Render() {
		t.Fatal("Render is not deterministic")
	}
	if got, want := strings.Count(out, "\n"), 2+len(s.Rules); got != want {
		t.Fatalf("Render wrote %d lines for %d rules:\n%s", got, len(s.Rules), out)
	}
	if !strings.HasSuffix(out, "\n") {
		t.Fatal("Render output does not end in a newline")
	}
}

func FuzzRender(f *testing.F) {
	for _, s := range renderSeeds() {
		f.Add(s.bits, s.name, s.why, s.op, s.value, s.errno, s.action)
	}
	f.Fuzz(func(t *testing.T, bits uint64, name, why, op string, value, errno uint64, action string) {
		checkRender(t, renderSeed{bits, name, why, op, value, errno, action})
	})
}

func TestRenderCorpus(t *testing.T) {
	for i, s := range renderSeeds() {
		t.Run(strconv.Itoa(i), func(t *testing.T) { checkRender(t, s) })
	}
}
