//go:build linux && cgo

package jail

import (
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	runcseccomp "github.com/opencontainers/runc/libcontainer/seccomp"
	libseccomp "github.com/seccomp/libseccomp-golang"

	"github.com/opencontainers/runc/libcontainer/configs"

	"github.com/pyjail/pyjail/policy"
)

// TestSeccompSupportCompiledIn fails a build without `-tags seccomp`: such
// a binary cannot apply the filter, and New refuses to run code with it.
func TestSeccompSupportCompiledIn(t *testing.T) {
	if !runcseccomp.Enabled {
		t.Fatal("libcontainer seccomp support is not compiled in; build and test with CGO_ENABLED=1 -tags seccomp")
	}
}

// seccompOptions enumerates every SeccompOptions value by reflection, as
// the policy invariant tests do.
func seccompOptions(t *testing.T) map[string]policy.SeccompOptions {
	t.Helper()
	typ := reflect.TypeFor[policy.SeccompOptions]()
	out := map[string]policy.SeccompOptions{}
	for bits := range uint64(1) << typ.NumField() {
		var opt policy.SeccompOptions
		v := reflect.ValueOf(&opt).Elem()
		var name []string
		for i := range typ.NumField() {
			if typ.Field(i).Type.Kind() != reflect.Bool {
				t.Fatalf("SeccompOptions.%s is not a bool; extend seccompOptions", typ.Field(i).Name)
			}
			on := bits&(1<<i) != 0
			v.Field(i).SetBool(on)
			if on {
				name = append(name, typ.Field(i).Name)
			}
		}
		out["+"+strings.Join(name, "+")] = opt
	}
	return out
}

// allRelaxations is the widest filter: every option on.
func allRelaxations(t *testing.T) policy.Seccomp {
	t.Helper()
	var widest policy.Seccomp
	for _, opt := range seccompOptions(t) {
		if s := policy.SeccompFilter(opt); len(s.Rules) > len(widest.Rules) {
			widest = s
		}
	}
	return widest
}

// onlyOn lists the names that exist on one architecture only, so that
// resolving them for the other one is not expected. A new entry here is a
// reviewed decision, not a way to silence a typo.
var onlyOn = map[string][]string{
	"amd64": {
		"access", "alarm", "arch_prctl", "chmod", "chown", "creat", "dup2", "epoll_create",
		"epoll_wait", "eventfd", "fork", "getdents", "getpgrp", "lchown", "link", "lstat", "mkdir",
		"open", "pause", "pipe", "poll", "readlink", "rename", "rmdir", "select", "stat", "symlink",
		"time", "unlink", "utime", "utimes", "vfork",
	},
	"arm64": {},
}

// TestSeccompNamesResolve resolves every rule name with libseccomp for amd64
// and arm64. runc ignores a name it cannot resolve and says so only at
// debug level, so a typo in the table would silently deny a syscall (or,
// in a deny rule, silently allow it).
func TestSeccompNamesResolve(t *testing.T) {
	s := allRelaxations(t)
	native := runtime.GOARCH
	if !supportedArch(native) {
		t.Skipf("no allowlist for %s", native)
	}
	for _, archName := range []string{"amd64", "arm64"} {
		t.Run(archName, func(t *testing.T) {
			arch, err := libseccomp.GetArchFromString(archName)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range s.Rules {
				for _, name := range r.Names {
					nr, err := libseccomp.GetSyscallFromNameByArch(name, arch)
					// libseccomp returns a negative pseudo number for a
					// syscall it knows that this architecture lacks.
					ok := err == nil && nr >= 0
					switch {
					case ok:
					case archName == native:
						t.Errorf("%q does not resolve on native %s (err %v, nr %d)", name, archName, err, nr)
					case !slices.Contains(onlyOn[native], name):
						t.Errorf("%q does not resolve on %s; fix the name or list it in onlyOn[%q]", name, archName, native)
					}
				}
			}
		})
	}
	// An onlyOn entry that resolves everywhere would hide a missing name.
	for arch, names := range onlyOn {
		for _, other := range []string{"amd64", "arm64"} {
			if other == arch {
				continue
			}
			a, _ := libseccomp.GetArchFromString(other)
			for _, name := range names {
				if nr, err := libseccomp.GetSyscallFromNameByArch(name, a); err == nil && nr >= 0 {
					t.Errorf("onlyOn[%q] lists %q, but %s has it too", arch, name, other)
				}
			}
		}
	}
}

func TestSeccompConvert(t *testing.T) {
	for name, opt := range seccompOptions(t) {
		t.Run(name, func(t *testing.T) {
			s := policy.SeccompFilter(opt)
			got, err := toLibcontainerSeccomp(s)
			if err != nil {
				t.Fatal(err)
			}
			if got.DefaultAction == configs.Allow {
				t.Error("default action is allow")
			}
			if got.DefaultErrnoRet == nil || *got.DefaultErrnoRet != 1 {
				t.Errorf("default errno = %v, want EPERM", got.DefaultErrnoRet)
			}
			if want := []string{runtime.GOARCH}; !slices.Equal(got.Architectures, want) {
				t.Errorf("architectures = %q, want %q", got.Architectures, want)
			}
			n := 0
			for _, r := range s.Rules {
				n += len(r.Names)
			}
			if len(got.Syscalls) != n {
				t.Errorf("%d syscall entries for %d names", len(got.Syscalls), n)
			}
			for _, sc := range got.Syscalls {
				switch sc.Name {
				case "clone3":
					if sc.Action != configs.Errno || sc.ErrnoRet == nil || *sc.ErrnoRet != 38 {
						t.Errorf("clone3 = %+v, want errno ENOSYS", sc)
					}
				case "clone":
					if len(sc.Args) != 1 || sc.Args[0].Op != configs.MaskEqualTo || sc.Args[0].ValueTwo != 0 {
						t.Errorf("clone args = %+v, want one masked comparison with 0", sc.Args)
					}
				}
				if sc.Action == configs.Allow && sc.ErrnoRet != nil {
					t.Errorf("%s: errno set on an allow rule", sc.Name)
				}
			}
		})
	}
}

func TestSeccompConvertRejects(t *testing.T) {
	good := func() policy.Seccomp {
		return policy.Seccomp{
			DefaultAction: policy.ActErrno,
			Architectures: []string{runtime.GOARCH},
			Rules:         []policy.Rule{{Names: []string{"read"}, Action: policy.ActAllow, Why: "reading"}},
		}
	}
	if _, err := toLibcontainerSeccomp(good()); err != nil {
		t.Fatalf("good filter: %v", err)
	}
	foreign := "arm64"
	if runtime.GOARCH == "arm64" {
		foreign = "amd64"
	}
	for name, tc := range map[string]func(*policy.Seccomp){
		"default allow":  func(s *policy.Seccomp) { s.DefaultAction = policy.ActAllow },
		"unknown action": func(s *policy.Seccomp) { s.Rules[0].Action = "trace" },
		"unknown op":     func(s *policy.Seccomp) { s.Rules[0].Args = []policy.Arg{{Op: "=~"}} },
		"foreign arch":   func(s *policy.Seccomp) { s.Architectures = []string{foreign} },
		"extra arch":     func(s *policy.Seccomp) { s.Architectures = append(s.Architectures, "x86") },
		"unsupported":    func(s *policy.Seccomp) { s.Architectures = []string{"unsupported_riscv64"} },
		"same arg twice": func(s *policy.Seccomp) {
			s.Rules[0].Args = []policy.Arg{{Index: 1, Op: policy.OpNotEqual, Value: 1}, {Index: 1, Op: policy.OpNotEqual, Value: 2}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := good()
			tc(&s)
			if got, err := toLibcontainerSeccomp(s); err == nil {
				t.Errorf("converted without error: %+v", got)
			}
		})
	}
}

// TestSeccompLibseccompAccepts builds (without loading) a libseccomp filter
// from the converted policy the way libcontainer's InitSeccomp does, so that
// a rule libseccomp refuses fails here rather than at container start.
func TestSeccompLibseccompAccepts(t *testing.T) {
	if !runcseccomp.Enabled {
		t.Skip("seccomp support not compiled in; see TestSeccompSupportCompiledIn")
	}
	c, err := toLibcontainerSeccomp(allRelaxations(t))
	if err != nil {
		t.Fatal(err)
	}
	filter, err := libseccomp.NewFilter(libseccomp.ActErrno.SetReturnCode(int16(*c.DefaultErrnoRet)))
	if err != nil {
		t.Fatal(err)
	}
	defer filter.Release()
	for _, a := range c.Architectures {
		arch, err := libseccomp.GetArchFromString(a)
		if err != nil {
			t.Fatal(err)
		}
		if err := filter.AddArch(arch); err != nil {
			t.Fatal(err)
		}
	}
	for _, sc := range c.Syscalls {
		nr, err := libseccomp.GetSyscallFromName(sc.Name)
		if err != nil {
			t.Errorf("%s: %v", sc.Name, err)
			continue
		}
		act := libseccomp.ActAllow
		switch sc.Action {
		case configs.Allow:
		case configs.Errno:
			act = libseccomp.ActErrno.SetReturnCode(int16(*sc.ErrnoRet))
		case configs.KillProcess:
			act = libseccomp.ActKillProcess
		default:
			t.Fatalf("%s: unexpected action %v", sc.Name, sc.Action)
		}
		var conds []libseccomp.ScmpCondition
		for _, a := range sc.Args {
			op := map[configs.Operator]libseccomp.ScmpCompareOp{
				configs.EqualTo: libseccomp.CompareEqual, configs.NotEqualTo: libseccomp.CompareNotEqual,
				configs.LessThan: libseccomp.CompareLess, configs.LessThanOrEqualTo: libseccomp.CompareLessOrEqual,
				configs.GreaterThan: libseccomp.CompareGreater, configs.GreaterThanOrEqualTo: libseccomp.CompareGreaterEqual,
				configs.MaskEqualTo: libseccomp.CompareMaskedEqual,
			}[a.Op]
			cond, err := libseccomp.MakeCondition(a.Index, op, a.Value, a.ValueTwo)
			if err != nil {
				t.Fatalf("%s: %v", sc.Name, err)
			}
			conds = append(conds, cond)
		}
		if err := filter.AddRuleConditional(nr, act, conds); err != nil {
			t.Errorf("adding %s %+v: %v", sc.Name, sc.Args, err)
		}
	}
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "filter.bpf"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := filter.ExportBPF(f); err != nil {
		t.Fatalf("exporting BPF: %v", err)
	}
}
