//go:build linux && cgo

package jail

import (
	"fmt"
	"io"
	"os"

	"github.com/opencontainers/runc/libcontainer/configs"
	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// compileBPF compiles a jail filter into the classic BPF program a fork
// server's child loads with prctl(PR_SET_SECCOMP), for the native
// architecture. It builds the filter the way libcontainer's InitSeccomp
// does from the same configs.Seccomp (default action, architectures, one
// rule per name with all its conditions ANDed), so a forked execution and
// a container execution run under the same rules; the escape corpus runs
// against both to hold them in step.
func compileBPF(sc *configs.Seccomp) ([]byte, error) {
	def, err := scmpAction(sc.DefaultAction, sc.DefaultErrnoRet)
	if err != nil {
		return nil, fmt.Errorf("default action: %w", err)
	}
	filter, err := libseccomp.NewFilter(def)
	if err != nil {
		return nil, fmt.Errorf("creating seccomp filter: %w", err)
	}
	defer filter.Release()
	for _, a := range sc.Architectures {
		arch, err := libseccomp.GetArchFromString(a)
		if err != nil {
			return nil, fmt.Errorf("architecture %q: %w", a, err)
		}
		if err := filter.AddArch(arch); err != nil {
			return nil, fmt.Errorf("adding architecture %q: %w", a, err)
		}
	}
	// A binary tree instead of a linear list of ~150 comparisons: every
	// system call of a forked run passes this filter (libcontainer does
	// the same above 32 rules).
	if len(sc.Syscalls) > 32 {
		if err := filter.SetOptimize(2); err != nil {
			return nil, fmt.Errorf("optimizing seccomp filter: %w", err)
		}
	}
	// The child sets no_new_privs through the jail's config already; the
	// exported program must not depend on libseccomp setting it.
	if err := filter.SetNoNewPrivsBit(false); err != nil {
		return nil, fmt.Errorf("clearing no_new_privs bit: %w", err)
	}
	for _, call := range sc.Syscalls {
		act, err := scmpAction(call.Action, call.ErrnoRet)
		if err != nil {
			return nil, fmt.Errorf("syscall %s: %w", call.Name, err)
		}
		if act == def {
			continue
		}
		nr, err := libseccomp.GetSyscallFromName(call.Name)
		if err != nil {
			// Unknown to this libseccomp: libcontainer skips it too.
			continue
		}
		if len(call.Args) == 0 {
			if err := filter.AddRule(nr, act); err != nil {
				return nil, fmt.Errorf("rule for %s: %w", call.Name, err)
			}
			continue
		}
		conds := make([]libseccomp.ScmpCondition, 0, len(call.Args))
		for _, a := range call.Args {
			op, err := scmpOp(a.Op)
			if err != nil {
				return nil, fmt.Errorf("syscall %s: %w", call.Name, err)
			}
			c, err := libseccomp.MakeCondition(a.Index, op, a.Value, a.ValueTwo)
			if err != nil {
				return nil, fmt.Errorf("syscall %s: %w", call.Name, err)
			}
			conds = append(conds, c)
		}
		if err := filter.AddRuleConditional(nr, act, conds); err != nil {
			return nil, fmt.Errorf("rule for %s: %w", call.Name, err)
		}
	}
	// libseccomp 2.5 (Debian 12) can export only to a descriptor.
	mem, err := unix.MemfdCreate("pyjail-seccomp", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("creating memfd: %w", err)
	}
	f := os.NewFile(uintptr(mem), "pyjail-seccomp")
	defer f.Close()
	if err := filter.ExportBPF(f); err != nil {
		return nil, fmt.Errorf("exporting seccomp filter: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	prog, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	if len(prog) == 0 || len(prog)%8 != 0 || len(prog)/8 > 0xffff {
		return nil, fmt.Errorf("exported seccomp program has %d bytes, not a whole number of instructions", len(prog))
	}
	return prog, nil
}

func scmpAction(a configs.Action, errno *uint) (libseccomp.ScmpAction, error) {
	switch a {
	case configs.Allow:
		return libseccomp.ActAllow, nil
	case configs.Errno:
		ret := uint(unix.EPERM)
		if errno != nil {
			ret = *errno
		}
		return libseccomp.ActErrno.SetReturnCode(int16(ret)), nil
	case configs.KillProcess:
		return libseccomp.ActKillProcess, nil
	case configs.Kill, configs.KillThread:
		return libseccomp.ActKillThread, nil
	}
	return libseccomp.ActInvalid, fmt.Errorf("action %v has no BPF form here", a)
}

func scmpOp(op configs.Operator) (libseccomp.ScmpCompareOp, error) {
	switch op {
	case configs.EqualTo:
		return libseccomp.CompareEqual, nil
	case configs.NotEqualTo:
		return libseccomp.CompareNotEqual, nil
	case configs.GreaterThan:
		return libseccomp.CompareGreater, nil
	case configs.GreaterThanOrEqualTo:
		return libseccomp.CompareGreaterEqual, nil
	case configs.LessThan:
		return libseccomp.CompareLess, nil
	case configs.LessThanOrEqualTo:
		return libseccomp.CompareLessOrEqual, nil
	case configs.MaskEqualTo:
		return libseccomp.CompareMaskedEqual, nil
	}
	return libseccomp.CompareInvalid, fmt.Errorf("operator %v has no BPF form here", op)
}
