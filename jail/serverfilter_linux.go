//go:build linux && cgo

package jail

import (
	"errors"
	"fmt"
	"os"
	"strings"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"

	"github.com/pyjail/pyjail/policy"
)

// ServerFilter is what LoadServerFilter loaded: how many system calls of
// policy.ServerDeny this kernel and libseccomp know (and so deny), and
// which names they do not (skipped, as libcontainer skips them).
type ServerFilter struct {
	Denied  int
	Unknown []string
}

// LoadServerFilter loads policy.ServerDeny into this process, every thread
// of it (TSYNC), for good: the server and everything it starts from now on
// get EPERM from the denied calls. cmd/pyjail calls it for the commands
// that build jails once the process runs as root (rootless: after its id
// maps are written), before any jail is built. It does not set
// no_new_privs (a root server needs CAP_SYS_ADMIN for it instead; a
// rootless one has set it already).
func LoadServerFilter() (ServerFilter, error) {
	var sf ServerFilter
	s := policy.ServerDeny()
	// NewFilter asks for TSYNC itself (every thread gets the filter);
	// unfilteredThreads checks that it did.
	filter, err := libseccomp.NewFilter(libseccomp.ActAllow)
	if err != nil {
		return sf, fmt.Errorf("creating the server's seccomp filter: %w", err)
	}
	defer filter.Release()
	// Native only: another ABI's calls hit the bad-arch action, a kill.
	for _, a := range s.Architectures {
		arch, err := libseccomp.GetArchFromString(a)
		if err != nil {
			return sf, fmt.Errorf("architecture %q: %w", a, err)
		}
		if arch != libseccomp.ArchNative {
			if native, _ := libseccomp.GetNativeArch(); arch != native {
				return sf, fmt.Errorf("the server filter's architecture %q is not this machine's", a)
			}
		}
	}
	for _, attr := range []struct {
		name string
		set  func() error
	}{
		{"no_new_privs bit", func() error { return filter.SetNoNewPrivsBit(false) }},
		{"bad-arch action", func() error { return filter.SetBadArchAction(libseccomp.ActKillProcess) }},
	} {
		if err := attr.set(); err != nil {
			return sf, fmt.Errorf("setting the server filter's %s: %w", attr.name, err)
		}
	}
	deny := libseccomp.ActErrno.SetReturnCode(int16(unix.EPERM))
	for _, r := range s.Rules {
		if r.Action != policy.ActErrno || len(r.Args) != 0 {
			return sf, fmt.Errorf("server filter rule %v: only plain denials are supported", r.Names)
		}
		for _, n := range r.Names {
			nr, err := libseccomp.GetSyscallFromName(n)
			if err != nil {
				sf.Unknown = append(sf.Unknown, n)
				continue
			}
			if err := filter.AddRule(nr, deny); err != nil {
				return sf, fmt.Errorf("denying %s to the server: %w", n, err)
			}
			sf.Denied++
		}
	}
	if err := filter.Load(); err != nil {
		if errors.Is(err, unix.EACCES) {
			return sf, fmt.Errorf("loading the server's seccomp filter (needs CAP_SYS_ADMIN or no_new_privs): %w", err)
		}
		return sf, fmt.Errorf("loading the server's seccomp filter: %w", err)
	}
	if n := unfilteredThreads(); n > 0 {
		return sf, fmt.Errorf("the server's seccomp filter reached not every thread (%d without; a kernel without TSYNC)", n)
	}
	return sf, nil
}

// unfilteredThreads counts this process's threads that run without a
// seccomp filter (Seccomp: 0 in their status).
func unfilteredThreads() int {
	tasks, _ := os.ReadDir("/proc/self/task")
	n := 0
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/status")
		if err != nil {
			continue // exited meanwhile
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Seccomp:"); ok && strings.TrimSpace(v) == "0" {
				n++
			}
		}
	}
	return n
}
