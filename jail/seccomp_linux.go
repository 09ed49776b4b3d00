//go:build linux && cgo

package jail

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"

	"github.com/opencontainers/runc/libcontainer/configs"
	runcseccomp "github.com/opencontainers/runc/libcontainer/seccomp"

	"github.com/pyjail/pyjail/policy"
)

// seccompFilters are the filters of one network mode: a container's, a
// fork server's, and the container's compiled for a fork server's
// children to stack on top (see zygote).
type seccompFilters struct {
	container  *configs.Seccomp
	forkServer *configs.Seccomp
	bpf        []byte
}

// newSeccompFilters converts and compiles the filters for opt.
func newSeccompFilters(opt policy.SeccompOptions) (seccompFilters, error) {
	var f seccompFilters
	var err error
	if f.container, err = toLibcontainerSeccomp(policy.SeccompFilter(opt)); err != nil {
		return f, fmt.Errorf("converting seccomp policy (egress %t): %w", opt.Egress, err)
	}
	if f.forkServer, err = toLibcontainerSeccomp(policy.ForkServerSeccompFilter(opt)); err != nil {
		return f, fmt.Errorf("converting fork server seccomp policy (egress %t): %w", opt.Egress, err)
	}
	if f.bpf, err = compileBPF(f.container); err != nil {
		return f, fmt.Errorf("compiling seccomp policy for forked jails (egress %t): %w", opt.Egress, err)
	}
	return f, nil
}

// filtersFor returns the filters of p's network mode: TCP sockets with
// egress, no inet socket without.
func (j *Jail) filtersFor(p policy.Profile) *seccompFilters {
	if j.cfg.Policy.Seccomp.ForProfile(p).Egress {
		return &j.filters[1]
	}
	return &j.filters[0]
}

// toLibcontainerSeccomp converts a policy filter into libcontainer's form.
// It refuses, rather than approximates, anything libcontainer would run with
// a different meaning: an invalid filter, a foreign or unreviewed
// architecture, an unknown action or operator.
func toLibcontainerSeccomp(s policy.Seccomp) (*configs.Seccomp, error) {
	// Validate refuses, among others, a default allow and two conditions
	// on one argument, which libcontainer would turn from AND into OR.
	if err := s.Validate(); err != nil {
		return nil, err
	}
	for _, a := range s.Architectures {
		// Only the native architecture: a filter naming another one would
		// admit its syscall numbers, which nobody reviewed for this table.
		if !supportedArch(a) || a != runtime.GOARCH {
			return nil, fmt.Errorf("checking seccomp architecture %q: pyjail has an allowlist only for the native amd64 or arm64 (this is %s)", a, runtime.GOARCH)
		}
	}
	def, err := convertAction(s.DefaultAction)
	if err != nil {
		return nil, fmt.Errorf("converting default action: %w", err)
	}
	out := &configs.Seccomp{
		DefaultAction: def,
		Architectures: append([]string(nil), s.Architectures...),
	}
	if s.DefaultAction == policy.ActErrno {
		out.DefaultErrnoRet = errnoPtr(s.DefaultErrno)
	}
	for i, r := range s.Rules {
		act, err := convertAction(r.Action)
		if err != nil {
			return nil, fmt.Errorf("converting rule %d %v: %w", i, r.Names, err)
		}
		args := make([]*configs.Arg, 0, len(r.Args))
		for _, a := range r.Args {
			op, err := convertOp(a.Op)
			if err != nil {
				return nil, fmt.Errorf("converting rule %d %v: %w", i, r.Names, err)
			}
			args = append(args, &configs.Arg{Index: a.Index, Value: a.Value, ValueTwo: a.ValueTwo, Op: op})
		}
		// libcontainer takes one name per Syscall; each gets its own copy
		// of the arguments so that no two entries share a pointer.
		for _, name := range r.Names {
			sc := &configs.Syscall{Name: name, Action: act, Args: cloneArgs(args)}
			if r.Action == policy.ActErrno {
				sc.ErrnoRet = errnoPtr(r.Errno)
			}
			out.Syscalls = append(out.Syscalls, sc)
		}
	}
	return out, nil
}

// supportedArch reports whether policy has a reviewed allowlist for arch.
// The names are libseccomp's, which is what configs.Seccomp carries: runc
// converts the OCI spelling ("SCMP_ARCH_X86_64") to these before
// libseccomp.GetArchFromString sees them.
func supportedArch(arch string) bool {
	switch arch {
	case "amd64", "arm64":
		return true
	}
	return false
}

// errnoPtr returns the errno to set explicitly; 0 means EPERM in policy, and
// spelling it out keeps the result independent of libcontainer's default.
func errnoPtr(e uint) *uint {
	if e == 0 {
		e = policy.ErrnoEPERM
	}
	return &e
}

func cloneArgs(args []*configs.Arg) []*configs.Arg {
	out := make([]*configs.Arg, len(args))
	for i, a := range args {
		c := *a
		out[i] = &c
	}
	return out
}

func convertAction(a policy.Action) (configs.Action, error) {
	switch a {
	case policy.ActAllow:
		return configs.Allow, nil
	case policy.ActErrno:
		return configs.Errno, nil
	case policy.ActKillProcess:
		return configs.KillProcess, nil
	}
	return 0, fmt.Errorf("unknown seccomp action %q", a)
}

func convertOp(op policy.Op) (configs.Operator, error) {
	switch op {
	case policy.OpEqual:
		return configs.EqualTo, nil
	case policy.OpNotEqual:
		return configs.NotEqualTo, nil
	case policy.OpLess:
		return configs.LessThan, nil
	case policy.OpLessEqual:
		return configs.LessThanOrEqualTo, nil
	case policy.OpGreater:
		return configs.GreaterThan, nil
	case policy.OpGreaterEqual:
		return configs.GreaterThanOrEqualTo, nil
	case policy.OpMaskedEqual:
		// Both sides mean (arg & Value) == ValueTwo: libcontainer hands
		// Value to libseccomp as the mask and ValueTwo as the datum.
		return configs.MaskEqualTo, nil
	}
	return 0, fmt.Errorf("unknown seccomp operator %q", op)
}

// SeccompNetworkLayer compiles the jail filters of both network modes as
// New does, and reports, for doctor, which profiles get which: without
// egress no inet socket at all, with egress TCP sockets only.
func SeccompNetworkLayer(cfg policy.Config) policy.Layer {
	l := policy.Layer{Name: "seccomp_network", Required: true, Fix: "rebuild with CGO_ENABLED=1 go build -tags seccomp"}
	if !runcseccomp.Enabled {
		l.Detail = "binary built without seccomp"
		return l
	}
	var with, without []string
	for _, name := range slices.Sorted(maps.Keys(cfg.Profiles)) {
		if cfg.Profiles[name].Egress != nil {
			with = append(with, string(name))
		} else {
			without = append(without, string(name))
		}
	}
	for _, egress := range []bool{false, true} {
		opt := cfg.Seccomp
		opt.Egress = egress
		if _, err := newSeccompFilters(opt); err != nil {
			l.Detail, l.Fix = err.Error(), "report a bug: pyjail's own seccomp table does not compile here"
			return l
		}
	}
	l.Active = true
	l.Detail = fmt.Sprintf("no egress (%s): inet sockets refused (EAFNOSUPPORT)", listOrNone(without))
	l.Detail += fmt.Sprintf("; egress (%s): TCP sockets only, UDP and raw refused (EPERM)", listOrNone(with))
	return l
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "no profile"
	}
	return strings.Join(names, ", ")
}
