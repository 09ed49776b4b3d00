//go:build linux && cgo

package jail

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/pyjail/pyjail/egress"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// EgressPort is the port of the gateway's socket on a jail's loopback:
// HTTP_PROXY and HTTPS_PROXY name http://127.0.0.1:EgressPort.
const EgressPort = 3128

// ErrNoGateway means a profile with egress was asked to run and the
// server has no gateway: such a profile fails closed instead of running
// with a network it cannot decide.
var ErrNoGateway = errors.New("the profile has egress but the server runs no egress gateway")

// egressEnv is the environment of a jail whose profile has egress: every
// HTTP client of the standard library, requests, pandas and pip reads
// these, and nothing bypasses the gateway (there is no other way out).
func egressEnv(p policy.Profile) []string {
	if p.Egress == nil {
		return nil
	}
	proxy := "http://127.0.0.1:" + strconv.Itoa(EgressPort)
	return []string{
		"HTTP_PROXY=" + proxy, "HTTPS_PROXY=" + proxy,
		"http_proxy=" + proxy, "https_proxy=" + proxy,
		"NO_PROXY=", "no_proxy=",
	}
}

// egressPort is the Boot's EgressPort for p.
func egressPort(p policy.Profile) int {
	if p.Egress == nil {
		return 0
	}
	return EgressPort
}

// listenInNetns brings up lo in the network namespace of pid and opens a
// TCP listener on 127.0.0.1:EgressPort there. The socket belongs to that
// namespace, so only the jail can connect to it; its listening end stays
// here, with the gateway. The jail gets no interface, route or address
// beyond lo's: the gateway is its one way out, and no veth, NAT or
// packet filter is involved.
//
// setns(CLONE_NEWNET) changes only the calling thread, so the work runs on
// a locked thread that returns to the server's namespace before it is
// unlocked; a thread that cannot return is left locked, and the runtime
// ends it with its goroutine.
func listenInNetns(pid int) (net.Listener, error) {
	target, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, fmt.Errorf("opening the jail's network namespace: %w", err)
	}
	defer target.Close()
	type result struct {
		l   net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("opening the server's network namespace: %w", err)}
			return
		}
		defer self.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("entering the jail's network namespace: %w", err)}
			return
		}
		l, err := loopbackListener()
		if unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		} else if l != nil {
			_ = l.Close()
			l, err = nil, errors.New("leaving the jail's network namespace failed")
		}
		done <- result{l: l, err: err}
	}()
	r := <-done
	return r.l, r.err
}

// loopbackListener runs inside the jail's namespace: lo up, then listen.
func loopbackListener() (net.Listener, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening a socket in the jail's namespace: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return nil, err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return nil, fmt.Errorf("reading lo's flags: %w", err)
	}
	if ifr.Uint16()&unix.IFF_UP == 0 {
		ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
		if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
			return nil, fmt.Errorf("bringing up lo: %w", err)
		}
	}
	l, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(EgressPort))
	if err != nil {
		return nil, fmt.Errorf("listening on the jail's loopback: %w", err)
	}
	return l, nil
}

// netPid is the host pid of a process in the jail's network namespace.
func (inst *instance) netPid() (int, error) {
	switch b := inst.body.(type) {
	case *containerBody:
		st, err := b.c.State()
		if err != nil {
			return 0, err
		}
		return st.InitProcessPid, nil
	case *forkedBody:
		if b.pid > 0 {
			return b.pid, nil
		}
	}
	return 0, errors.New("the jail has no process whose network namespace is known")
}

// startEgress opens the gateway for one run (or one call of a session) of
// a profile with egress, under the policy narrowed by the request. The
// returned stop closes it and writes what it saw into the result. Without
// egress both are no-ops.
func (inst *instance) startEgress(ctx context.Context, req record.Request) (stop func(*record.Result), err error) {
	inst.netLimit = nil
	p := inst.profile.Egress
	if p == nil {
		return func(*record.Result) {}, nil
	}
	if inst.j.cfg.Egress == nil {
		return nil, ErrNoGateway
	}
	if p, err = p.Narrow(req.EgressHosts); err != nil {
		return nil, fmt.Errorf("narrowing egress for %q: %w", inst.id, err)
	}
	pid, err := inst.netPid()
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %w", errLostBeforeRun, inst.id, err)
	}
	l, err := listenInNetns(pid)
	if err != nil {
		return nil, fmt.Errorf("opening the egress socket of %q: %w", inst.id, err)
	}
	run := inst.j.cfg.Egress.Start(ctx, l, p)
	inst.netLimit = run.Exceeded()
	return func(res *record.Result) {
		rep := run.Close()
		inst.netLimit = nil
		if res == nil {
			return
		}
		res.Network, res.NetworkOmitted = rep.Entries, rep.Omitted
		if res.Network == nil {
			res.Network = []record.NetworkEntry{}
		}
		if rep.Limit != "" && res.Verdict != record.VerdictTimeout {
			res.Verdict = record.VerdictNetworkLimit
			res.Message = rep.Limit + "; the run was ended"
		}
	}, nil
}

// Gateway is the egress gateway a Jail hands the sockets of its egress
// profiles to (package egress).
type Gateway = egress.Gateway
