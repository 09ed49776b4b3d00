package bench

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A run's CPU is spread over processes no single counter sees: the
// supervisor's goroutines (RUSAGE_SELF), the jail itself, a pool's boot of
// its replacement or a fork server's fork of one (all in cgroups under the
// bench's cgroup parent, which keeps the usage of removed children), and
// kernel threads working for them (a network namespace's teardown runs in
// a kworker, outside every cgroup of ours). cpuSample reads each at one
// instant; the difference of two samples over many runs, divided by the
// runs, is what one costs.
type cpuSample struct {
	supervisor time.Duration // this process, user and system
	jails      time.Duration // the cgroup parent's tree
	jailsErr   error
	busy       time.Duration // every CPU of the machine, not idle
	machineErr error
}

// cpuMeter samples the counters of one bench's jails.
type cpuMeter struct {
	// tree reads the CPU charged to the bench's cgroup parent.
	tree func() (time.Duration, error)
}

func (m cpuMeter) sample() cpuSample {
	s := cpuSample{supervisor: selfCPU()}
	if m.tree != nil {
		s.jails, s.jailsErr = m.tree()
	} else {
		s.jailsErr = fmt.Errorf("no cgroup tree to read")
	}
	s.busy, s.machineErr = machineBusy()
	return s
}

// cpuCost is the CPU of n executions between two samples, per execution, in
// ms. Other is what the machine spent beyond the supervisor and the jails:
// kernel threads, and, on a machine that is not quiet, anything else.
type cpuCost struct {
	SupervisorMS float64 `json:"supervisor_ms"`
	JailsMS      float64 `json:"jails_ms"`
	// PyjailMS is the supervisor and the jails together.
	PyjailMS  float64 `json:"pyjail_ms"`
	MachineMS float64 `json:"machine_ms"`
	OtherMS   float64 `json:"other_ms"`
	// Unread names a counter that could not be read; its columns are 0.
	Unread string `json:"unread,omitempty"`
}

func costPer(before, after cpuSample, n int) cpuCost {
	var c cpuCost
	if n <= 0 {
		return c
	}
	per := func(d time.Duration) float64 { return ms(d / time.Duration(n)) }
	c.SupervisorMS = per(after.supervisor - before.supervisor)
	var unread []string
	if err := firstErr(before.jailsErr, after.jailsErr); err != nil {
		unread = append(unread, "jails: "+err.Error())
	} else {
		c.JailsMS = per(after.jails - before.jails)
	}
	c.PyjailMS = round2(c.SupervisorMS + c.JailsMS)
	if err := firstErr(before.machineErr, after.machineErr); err != nil {
		unread = append(unread, "machine: "+err.Error())
	} else {
		c.MachineMS = per(after.busy - before.busy)
		c.OtherMS = round2(max(0, c.MachineMS-c.PyjailMS))
	}
	c.Unread = strings.Join(unread, "; ")
	return c
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// selfCPU is the user and system time of this process's threads. Reaped
// children are left out: a container's init moves into the jail's cgroup
// before it runs any code of note, and counting RUSAGE_CHILDREN as well
// would count it twice.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// userHZ is the unit of /proc/stat: USER_HZ, 100 on every Linux ABI that
// pyjail builds for (the kernel fixes it for userspace; sysconf's
// _SC_CLK_TCK reads the same constant).
const userHZ = 100

// machineBusy is the time every CPU spent not idle, from /proc/stat's
// first line: user, nice, system, irq, softirq and steal (guest time is
// already inside user). At 10 ms a tick it is coarse for one run and exact
// enough over a throughput phase's thousands.
func machineBusy() (time.Duration, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, fmt.Errorf("/proc/stat is empty")
	}
	return parseCPULine(sc.Text())
}

// parseCPULine sums the busy fields of /proc/stat's "cpu" line.
func parseCPULine(line string) (time.Duration, error) {
	f := strings.Fields(line)
	// cpu user nice system idle iowait irq softirq steal [guest guest_nice]
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var ticks uint64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: field %d of %q: %w", i, line, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}
