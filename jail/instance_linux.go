//go:build linux && cgo

package jail

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"

	"github.com/pyjail/pyjail/jail/pyrunner"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/workspace/changes"
)

// instance is one jail whose runner waits for its code, of any kind: a
// started container (container_linux.go) or a child of a fork server
// (forked_linux.go). What the kinds share is here: the runner protocol
// (control pipes, capped output, ready, exec, reply), the wait for the
// outcome, the counters and the verdict. What differs is its body.
//
// An instance serves one exec and is then destroyed, unless it is a
// session's (session_linux.go), which serves one exec per call of the
// session, one at a time. It is not safe for concurrent use, except that
// destroy may race the end of exec and that the fields under idle belong
// to the pool that holds it.
type instance struct {
	j       *Jail
	id      string
	profile policy.Profile
	body    body
	created time.Time

	// The runner protocol.
	ctlIn    *os.File      // the supervisor's end of the runner's fd 3
	messages chan message  // lines from the runner's fd 4
	exited   chan waitDone // closed after the first process's exit is known
	exitAt   time.Time     // when it was known; written before exited closes
	replyAt  time.Time     // when the reply came, if it did
	// The output of the run (a session's: of its current call), and its
	// drain.
	stdout   *cappedBuffer
	stderr   *cappedBuffer
	drained  *sync.WaitGroup
	flooded  chan struct{}
	landlock string

	// cpuAtReady is the cgroup's CPU time when the code's clock started,
	// so that a pooled jail's boot and warm-up are not charged to the code;
	// oomAtReady its OOM-kill count then, and peak, when set, the cgroup v2
	// memory.peak whose reset started the run's own peak (both for a
	// session's calls, whose jail lives on).
	cpuAtReady uint64
	oomAtReady uint64
	// cpuWatch, when set, is the call's CPU-time limit enforced from
	// here: a session call where RLIMIT_CPU cannot end it (see
	// session.startCall). await then kills the jail once its cgroup has
	// used that much CPU since cpuAtReady.
	cpuWatch time.Duration
	peak     *os.File
	// memoryLimit is the cgroup's memory limit, for verdict messages.
	memoryLimit int64
	// frozen: the run ended with the jail's cgroup frozen (a workspace run
	// that answered before its jail exited); destroy thaws it after the
	// kill, since on cgroup v1 a frozen task does not die until thawed.
	frozen bool

	ws     workspaceMount
	idle   idleState
	timing Timing

	// session is the session that holds the jail, nil for a single run;
	// seq is the Seq of its current call, which its reply must carry.
	session *session
	seq     int64

	// netLimit is closed when the run passes an egress limit (nil: no
	// gateway for this run); await then kills the jail.
	netLimit <-chan struct{}

	destroyOne sync.Once
}

// body is what differs between the kinds of jail.
type body interface {
	// kill sends SIGKILL to the jail's first process, the init of its pid
	// namespace, which takes every other process with it.
	kill()
	// release frees what the jail holds once its processes are gone.
	release()
	// cgroup is the manager of the jail's own cgroup.
	cgroup() (cgroups.Manager, error)
	// lost is told that the jail died before its run finished, before the
	// run tries another jail.
	lost(ctx context.Context)
}

// workspaceMount is the workspace a jail has mounted.
type workspaceMount struct {
	// dir is the host path, or "" for none; ino its inode when mounted: a
	// snapshot restore swaps the directory for another.
	dir  string
	ino  uint64
	plan workspacePlan
	// deferred marks a forked jail that attaches its workspace when its
	// code comes (attachWorkspace); execPath is then where, in the Exec.
	deferred bool
	execPath string
	// before is the tree as it was before the code ran, or beforeErr why
	// it could not be recorded (a workspace beyond its shape limits).
	before    changes.Tree
	beforeErr error
}

type message struct {
	msg pyrunner.Message
	err error
}

// waitDone is how a jail's first process ended: an exit code, or the name
// of the signal that killed it (code -1 then).
type waitDone struct {
	code   int
	signal string
	// err explains an end the exit status cannot: a fork server that could
	// not fork, or died.
	err string
}

// errLostBeforeRun is returned by exec when the jail was gone before the
// code reached it: nothing ran, so the code may run in another jail.
var errLostBeforeRun = errors.New("jail exited before it received the code")

// newInstance is a jail of prof before it has a body or a process.
func (j *Jail) newInstance(prof policy.Profile, kind Kind) *instance {
	inst := &instance{
		j: j, id: newID(), profile: prof,
		messages: make(chan message, 2),
		exited:   make(chan waitDone, 1),
		stdout:   newCappedBuffer(int(prof.Limits.OutputBytes)),
		stderr:   newCappedBuffer(int(prof.Limits.OutputBytes)),
		drained:  new(sync.WaitGroup),
		flooded:  make(chan struct{}),
		created:  time.Now(),
	}
	inst.timing = Timing{ID: inst.id, Profile: prof.Name, Kind: kind, Created: inst.created}
	return inst
}

// drainOutputs copies the jail's stdout and stderr into its capped buffers
// until EOF, and kills the jail (through flooded) on a flood.
func (inst *instance) drainOutputs(outR, errR *os.File) {
	// Taken now: a session gives each call fresh ones.
	stdout, stderr, drained, flooded := inst.stdout, inst.stderr, inst.drained, inst.flooded
	var once sync.Once
	flood := func() { once.Do(func() { close(flooded) }) }
	floodLimit := inst.profile.Limits.OutputBytes * floodFactor
	drained.Add(2)
	go func() { defer drained.Done(); drain(outR, stdout, floodLimit, flood); outR.Close() }()
	go func() { defer drained.Done(); drain(errR, stderr, floodLimit, flood); errR.Close() }()
}

// awaitReady waits up to timeout for the runner's "ready" and reports the
// jail's start to the timing hook.
func (inst *instance) awaitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case m := <-inst.messages:
		if m.err != nil || m.msg.Type != "ready" {
			return inst.bootFailure(m)
		}
		inst.landlock = m.msg.Landlock
	case <-ctx.Done():
		return fmt.Errorf("waiting for the runner of %q: %w", inst.id, ctx.Err())
	}
	inst.timing.Start = time.Since(inst.created)
	return nil
}

// ready records the jail's start in its timing and tells the hook.
func (inst *instance) ready() {
	inst.timing.StartCPU = time.Duration(inst.cpuAtReady)
	inst.timing.Event = EventReady
	inst.j.report(inst.timing)
}

// bootFailure explains a runner that died or misbehaved before "ready".
func (inst *instance) bootFailure(m message) error {
	inst.body.kill()
	inst.drained.Wait()
	detail := inst.stderr.String()
	if len(detail) > 2000 {
		detail = detail[len(detail)-2000:]
	}
	if m.err != nil {
		return fmt.Errorf("runner in %q failed to boot: %w; stderr: %s", inst.id, m.err, detail)
	}
	return fmt.Errorf("runner in %q sent %q before ready; stderr: %s", inst.id, m.msg.Type, detail)
}

func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// readMessages decodes the runner's control lines. Lines are capped so a
// compromised runner cannot make the supervisor buffer without bound. A
// forked jail's "warmed" note goes to onWarmed instead of out.
func readMessages(r *os.File, out chan<- message, onWarmed func()) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var m pyrunner.Message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			select {
			case out <- message{err: fmt.Errorf("decoding runner message: %w", err)}:
			default:
			}
			return
		}
		if m.Type == "warmed" && onWarmed != nil {
			onWarmed()
			continue
		}
		select {
		case out <- message{msg: m}:
		default:
			// More than ready+reply: the runner is not following the
			// protocol; drop the surplus rather than block.
		}
	}
	final := message{err: io.EOF}
	if err := sc.Err(); err != nil {
		final = message{err: fmt.Errorf("reading runner messages: %w", err)}
	}
	// Never block: nobody reads after the run is over.
	select {
	case out <- final:
	default:
	}
}

// outcome is how the wait for a run ended, before counters and verdict.
type outcome struct {
	done     waitDone
	exited   bool
	reply    *pyrunner.Reply
	timedOut bool
	flooded  bool
	// cpuKilled: the jail was killed at its CPU-time limit (cpuWatch).
	cpuKilled bool
	// netLimited: the jail was killed at an egress limit.
	netLimited bool
	// messagesDone: the control pipe reached EOF (or garbage); no reply
	// can come any more.
	messagesDone bool
	wall         time.Duration
}

// exec runs code in the jail: steps 6 to 8 of the package doc. It sends
// the code, waits for the outcome under the deadline, and builds the
// result from the runner's reply and the cgroup's counters. Outcomes of
// the code are in the result; an error means the sandbox failed (or
// errLostBeforeRun: nothing ran), or ctx ended.
func (inst *instance) exec(ctx context.Context, req record.Request, timeout time.Duration) (*record.Result, error) {
	if inst.session != nil {
		return inst.session.exec(ctx, inst, req, timeout)
	}
	code := req.Code
	if inst.ws.dir != "" {
		inst.scanBefore(ctx)
	}
	stopEgress, err := inst.startEgress(ctx, req)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := writeJSONLine(inst.ctlIn, pyrunner.Exec{Code: code, Workspace: inst.ws.execPath}); err != nil {
		stopEgress(nil)
		// The runner reads a whole line before it runs anything: a failed
		// write means the jail died before the code could run.
		return nil, fmt.Errorf("%w: sending code to %q: %w", errLostBeforeRun, inst.id, err)
	}
	inst.ctlIn.Close()
	res, _, err := inst.conclude(ctx, req, timeout, start)
	stopEgress(res)
	return res, err
}

// conclude waits for the outcome of the code sent at start and builds its
// result (steps 7 and 8), for exec and a session's calls alike. It returns
// the outcome too, which a session reads to tell whether the call ended it.
func (inst *instance) conclude(ctx context.Context, req record.Request, timeout time.Duration, start time.Time) (*record.Result, outcome, error) {
	out, ctxErr := inst.await(ctx, timeout)
	out.wall = time.Since(start)
	if !inst.replyAt.IsZero() {
		inst.timing.Reply = inst.replyAt.Sub(start)
	}
	t := time.Now()
	inst.drainOutput()
	inst.timing.Drain = time.Since(t)
	if ctxErr != nil {
		return nil, out, fmt.Errorf("running %q: %w", inst.id, ctxErr)
	}
	if out.exited && out.done.err != "" && out.reply == nil && !out.timedOut && !out.flooded {
		return nil, out, fmt.Errorf("%w: running %q: %s", errForkServerDown, inst.id, out.done.err)
	}
	return inst.result(ctx, out, timeout, req.Queued), out, nil
}

// cpuWatchInterval is how often await reads the CPU time of a call whose
// CPU-time limit the kernel cannot enforce (instance.cpuWatch): a call
// may pass its limit by this much before it is killed.
const cpuWatchInterval = 100 * time.Millisecond

// await waits for the run to end: the jail's exit, its reply and EOF on
// its output, the deadline, an output flood, or ctx. On the deadline, a
// flood or ctx it kills the whole jail and waits for its exit.
func (inst *instance) await(ctx context.Context, timeout time.Duration) (outcome, error) {
	var out outcome
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	// outputsDone is armed once the runner has replied: the run is over
	// when its output streams reach EOF too. The runner closes them before
	// replying; a child that still holds them keeps the run going until
	// the jail exits.
	var outputsDone <-chan struct{}
	outputs := make(chan struct{})
	drained := inst.drained
	go func() { drained.Wait(); close(outputs) }()
	// grace bounds, for a session's call, the wait for EOF after the
	// reply: a process the call left running (layer none) may hold its
	// output pipes, and the session outlives the call.
	var grace <-chan time.Time
	// cpuTick polls the cgroup's CPU time while cpuWatch is set; reading
	// one counter ten times a second costs nothing measurable.
	var cpuTick <-chan time.Time
	if inst.cpuWatch > 0 {
		tick := time.NewTicker(cpuWatchInterval)
		defer tick.Stop()
		cpuTick = tick.C
	}
	messages := inst.messages
	var ctxErr error
wait:
	for {
		select {
		case <-cpuTick:
			if used := inst.cpuUsage(); used > inst.cpuAtReady && time.Duration(used-inst.cpuAtReady) >= inst.cpuWatch {
				out.cpuKilled = true
				break wait
			}
		case out.done = <-inst.exited:
			out.exited = true
			break wait
		case m := <-messages:
			if m.err != nil {
				messages = nil // EOF or garbage: the exit decides now
				out.messagesDone = true
				continue
			}
			// A session's replies carry their call's seq: a line that
			// answers another call (or a forgery, in layer none) is not
			// this call's answer.
			if m.msg.Type == "reply" && out.reply == nil && m.msg.Seq == inst.seq {
				out.reply, inst.replyAt = m.msg.Reply, time.Now()
				// Returning before the exit spares the caller the kernel's
				// teardown of a large address space (tens of ms with the
				// scientific stack loaded).
				outputsDone = outputs
				if inst.session != nil {
					grace = time.After(sessionOutputGrace)
				}
			}
		case <-grace:
			// Output written after this is dropped: the writer gets EPIPE.
			grace = nil
			inst.session.cutOutputs()
		case <-outputsDone:
			// A workspace run must leave no process that could touch the
			// workspace after its scan. Its runner waits after its reply
			// instead of exiting (an exiting task cannot be frozen until
			// its teardown ends), so the whole jail freezes at once: every
			// process of the jail is in its cgroup. Where freezing fails,
			// the jail is killed and its exit awaited.
			t := time.Now()
			frozen := inst.ws.dir == "" || inst.freeze()
			inst.timing.Freeze = time.Since(t)
			if !frozen {
				inst.body.kill()
				out.done, out.exited = <-inst.exited, true
			}
			break wait
		case <-timer.C:
			out.timedOut = true
			break wait
		case <-inst.flooded:
			out.flooded = true
			break wait
		case <-inst.netLimit:
			out.netLimited = true
			break wait
		case <-ctx.Done():
			ctxErr = ctx.Err()
			break wait
		}
	}
	if out.timedOut || out.flooded || out.cpuKilled || out.netLimited || ctxErr != nil {
		// SIGKILL to the pid namespace's init kills every process in it.
		inst.body.kill()
		out.done = <-inst.exited
		out.exited = true
	}
	return out, ctxErr
}

// result builds the record of a finished run: output, exit status,
// counters, workspace changes and the verdict.
func (inst *instance) result(ctx context.Context, out outcome, timeout, queued time.Duration) *record.Result {
	res := &record.Result{
		Profile: inst.profile.Name,
		Stdout:  inst.stdout.String(),
		Stderr:  inst.stderr.String(),
		WallMS:  out.wall.Milliseconds(),
		Truncated: record.Truncated{
			Stdout: inst.stdout.Truncated(),
			Stderr: inst.stderr.Truncated(),
		},
	}
	reply := out.reply
	if out.exited {
		res.ExitCode, res.Signal = out.done.code, out.done.signal
		if reply == nil && !out.messagesDone {
			reply = inst.awaitReply()
		}
	} else {
		// The runner exits with the status it reported, right after.
		res.ExitCode = reply.ExitCode
	}
	t := time.Now()
	c := inst.readCounters()
	inst.timing.Counters = time.Since(t)
	res.CPUMS = int64(c.cpuNS-min(c.cpuNS, inst.cpuAtReady)) / 1e6
	c.oomKills -= min(c.oomKills, inst.oomAtReady)
	res.PeakMemoryBytes = int64(c.peakBytes)
	if inst.ws.dir != "" {
		fc := inst.changesSince(ctx)
		res.Files = &fc
	}
	limits := inst.profile.Limits
	classify(res, classifyInput{
		reply: reply, timedOut: out.timedOut, flooded: out.flooded, timeout: timeout, queued: queued,
		oomKills: c.oomKills, memoryLimit: c.memoryLimit,
		cpuLimit: limits.EffectiveCPUTime(timeout), outputLimit: limits.OutputBytes,
	})
	inst.timing.Wall, inst.timing.Verdict = out.wall, res.Verdict
	inst.j.log.Info("run finished", logKeyID, inst.id, logKeyProfile, inst.profile.Name,
		logKeyVerdict, string(res.Verdict), logKeyWallMS, res.WallMS)
	return res
}

// awaitReply returns the runner's reply once its control pipe is closed.
// Every process of the jail is dead by now, so EOF comes at once; the
// bound only guards against a kernel that keeps a pipe open.
func (inst *instance) awaitReply() *pyrunner.Reply {
	var reply *pyrunner.Reply
	timeout := time.After(waitDelay)
	for {
		select {
		case m := <-inst.messages:
			if m.err != nil {
				return reply
			}
			if m.msg.Type == "reply" && reply == nil {
				reply = m.msg.Reply
			}
		case <-timeout:
			return reply
		}
	}
}

// drainOutput waits for the output pipes to reach EOF, but at most
// waitDelay: a process that escaped the kill must not hang the server.
func (inst *instance) drainOutput() {
	ch := make(chan struct{})
	drained := inst.drained
	go func() { drained.Wait(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(waitDelay):
		inst.j.log.Warn("output pipes still open after exit", logKeyID, inst.id)
	}
}

// freeze stops every process of the jail (cgroup freezer) and reports
// whether it did.
func (inst *instance) freeze() bool {
	mgr, err := inst.body.cgroup()
	if err == nil {
		err = setFrozen(mgr, true)
	}
	if err != nil {
		inst.j.log.Warn("freezing a finished workspace run; waiting for its exit instead", logKeyID, inst.id, "err", err)
		return false
	}
	inst.frozen = true
	return true
}

// markExited delivers how the jail's first process ended, once.
func (inst *instance) markExited(d waitDone) {
	inst.exitAt = time.Now()
	inst.exited <- d
	close(inst.exited)
}

// dead reports whether the runner has already exited (an idle jail that
// died cannot serve a request).
func (inst *instance) dead() bool {
	select {
	case <-inst.exited:
		// destroy still works: a drained, closed channel never blocks.
		return true
	default:
		return false
	}
}

// destroy kills whatever is left and frees the jail (step 9): its
// processes, cgroups and state. It is idempotent, and reports the jail's
// timing once it is gone.
func (inst *instance) destroy() {
	inst.destroyOne.Do(func() {
		t := time.Now()
		inst.body.kill()
		if inst.frozen {
			if mgr, err := inst.body.cgroup(); err == nil {
				_ = setFrozen(mgr, false) // the kill lands as the tasks thaw
			}
		}
		exited := false
		select {
		case <-inst.exited:
			exited = true
		case <-time.After(waitDelay):
		}
		inst.ctlIn.Close()
		inst.body.release()
		inst.timing.Destroy = time.Since(t)
		if exited && !inst.replyAt.IsZero() && inst.exitAt.After(inst.replyAt) {
			// The runner exits by itself right after its reply (the kill
			// above only meets a process already on its way out): this is
			// how long the kernel took to tear it down and report it.
			inst.timing.Exit = inst.exitAt.Sub(inst.replyAt)
		}
		inst.timing.Event = EventDone
		inst.j.report(inst.timing)
	})
}

func exitStatus(st *os.ProcessState) (code int, signal string) {
	if st == nil {
		return -1, ""
	}
	ws, ok := st.Sys().(syscall.WaitStatus)
	if !ok {
		return st.ExitCode(), ""
	}
	if ws.Signaled() {
		return -1, unix.SignalName(ws.Signal())
	}
	return ws.ExitStatus(), ""
}
