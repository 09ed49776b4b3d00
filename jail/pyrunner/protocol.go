package pyrunner

import (
	"embed"
	"io/fs"
	"strconv"
	"strings"

	"github.com/pyjail/pyjail/record"
)

// Files holds the runner's Python modules, placed read-only side by side
// in every jail's RunnerDir: FileName, the entry point, the modules of the
// process side it imports (the supervisor's channel, running one code,
// the fork server, sessions), and FenceFileName, the language fence.
// Install every *.py file of Files, and address the directory by the
// content of all of them.
//
//go:embed runner.py wire.py execute.py forkserver.py session.py checkpoint.py fence.py
var Files embed.FS

// Path is where the runner's entry point lives inside the jail.
const Path = "/opt/pyjail/runner.py"

// FileName is the runner's entry point inside RunnerDir.
const FileName = "runner.py"

// FenceFileName is the language fence inside RunnerDir: the runtime side of
// package policy's PythonRules.
const FenceFileName = "fence.py"

// Bootstrap returns the program, for python -I -B -c, that starts the
// runner installed in dir. The runner is imported rather than run as a
// script so that the precompiled bytecode of every module is used (a
// script's code is always compiled from source). Before main runs, the
// bootstrap takes dir off sys.path and every runner module out of
// sys.modules, binding none of them in __main__: user code can then
// neither import a copy of the runner nor reach the running one through
// the import system.
func Bootstrap(dir string) string {
	main := strings.TrimSuffix(FileName, ".py")
	var b strings.Builder
	b.WriteString("import sys; sys.path.insert(0, " + strconv.Quote(dir) + "); ")
	b.WriteString("__import__(" + strconv.Quote(main) + "); del sys.path[0]; ")
	for _, m := range modules() {
		if m != main {
			b.WriteString("del sys.modules[" + strconv.Quote(m) + "]; ")
		}
	}
	b.WriteString("sys.modules.pop(" + strconv.Quote(main) + ").main()")
	return b.String()
}

// modules returns the module names of Files, sorted.
func modules() []string {
	names, err := fs.Glob(Files, "*.py")
	if err != nil {
		panic(err) // only for a malformed pattern
	}
	for i, n := range names {
		names[i] = strings.TrimSuffix(n, ".py")
	}
	return names
}

// Descriptor numbers the runner reads and writes.
const (
	FDControlIn  = 3
	FDControlOut = 4
)

// Boot configures a runner before it signals readiness. It is sent first,
// possibly long before the code is known (warm pools).
type Boot struct {
	// Layer is the Python layer: "calc", "workspace" or "none".
	Layer string `json:"layer"`
	// Preload lists modules to import before signalling readiness.
	Preload []string `json:"preload,omitempty"`
	// AddressSpaceBytes is the headroom above the runner's current mapped
	// size (VmSize) that it allows itself with RLIMIT_AS right before the
	// code runs, so that one huge allocation raises MemoryError; 0 sets no
	// limit. It is headroom, not an absolute size, because a warm runner
	// may already map more than the memory limit after preloading.
	AddressSpaceBytes int64 `json:"address_space_bytes,omitempty"`
	// Workspace is the in-jail workspace path, or "" for none.
	Workspace string `json:"workspace,omitempty"`
	// Packages is the in-jail path of the caller's package layer, which
	// the runner appends to sys.path (after the rootfs's own), or "".
	Packages string `json:"packages,omitempty"`
	// ValueBytes caps the repr of the last expression.
	ValueBytes int `json:"value_bytes"`
	// ImageBytes caps the total size of captured figures.
	ImageBytes int `json:"image_bytes"`
	// Landlock asks the runner to restrict itself with Landlock when the
	// kernel supports it.
	Landlock bool `json:"landlock"`
	// CPUSeconds, when set, is the code's CPU-time limit: right before
	// the code runs, the runner sets RLIMIT_CPU to its CPU time so far
	// plus this (soft, SIGXCPU) and a second more (hard, SIGKILL), within
	// the hard limit its container started with. 0 leaves RLIMIT_CPU as it
	// is (a fork server's children set theirs from ForkServer.Rlimits).
	CPUSeconds uint64 `json:"cpu_seconds,omitempty"`
	// EgressPort, in a profile with egress, is the one TCP port Landlock
	// lets the code connect to: the gateway's on the jail's loopback
	// (0: no TCP at all).
	EgressPort int `json:"egress_port,omitempty"`
	// Policy is the Python-layer policy (deny-list, builtins, AST rules),
	// as returned by policy.PythonPolicy for Layer. The runner refuses to
	// run code in "calc" or "workspace" without it (fail closed).
	Policy map[string]any `json:"policy,omitempty"`
	// ForkServer, when set, makes the runner a fork server: after
	// preloading it answers "ready" and then forks one child per request
	// on FDForkRequests; each child isolates itself as ForkServer says and
	// then behaves like a single-use runner that has just booted.
	ForkServer *ForkServer `json:"fork_server,omitempty"`
	// Session makes a runner that is not forked serve a session (see
	// ForkRequest.Session) with FDSync as its sync socket: the runner's
	// own tests use it. The jail forks every session's jail.
	Session bool `json:"session,omitempty"`
}

// FDForkRequests is the fork server's request socket (SOCK_SEQPACKET). A
// request is ForkRequest as JSON with five descriptors attached
// (SCM_RIGHTS): the child's stdout, stderr, control in, control out and
// sync socket. The child says one byte on the sync socket, from which the
// supervisor learns its host pid (SO_PASSCRED), and goes on once the
// supervisor answers "g" after moving it into its cgroup.
const FDForkRequests = 5

// ForkRequest asks a fork server for one child.
type ForkRequest struct {
	Seq uint64 `json:"seq"`
	// Warm asks the child to run ForkServer.Warmup before it is ready:
	// right for a pool's idle jails, wasted on a jail a caller waits for.
	Warm bool `json:"warm,omitempty"`
	// Workspace makes the child of a workspace profile keep its sync
	// socket and the privileges it holds in the jail's user namespace
	// until its Exec: an Exec with Workspace set comes with a detached
	// mount of the workspace on the sync socket (SCM_RIGHTS), which the
	// child attaches (move_mount) before it drops them, installs its
	// seccomp filter and Landlock, and runs the code. The fork server
	// itself never has a workspace mounted, and one server serves every
	// workspace (a restored one, another tenant's).
	Workspace bool `json:"workspace,omitempty"`
	// Packages says the last descriptor is a detached read-only mount of
	// the caller's package layer (record.Request's Packages): the child
	// attaches it at record.PackagesMount before it drops its privileges
	// and appends it to sys.path, as a container's runner does with
	// Boot.Packages. Only for a child forked for its run (never Workspace
	// or Session): a layer is one tenant's, an idle child anyone's.
	Packages bool `json:"packages,omitempty"`
	// Session makes the child a session's jail: it isolates itself like
	// any child (its workspace, if any, comes as the sixth descriptor, as
	// a pool's idle children get theirs), keeps its sync socket, and
	// serves one call per Exec in the same interpreter until its control
	// pipe closes. Per call, the supervisor sends SessionPipes on the sync
	// socket with the call's stdout and stderr write ends attached
	// (SCM_RIGHTS), then the Exec with its Seq; the child runs the code
	// with those on fds 1 and 2, points 1 and 2 back at /dev/null (EOF for
	// the supervisor), and sends a reply with the same Seq. Never with
	// Workspace.
	Session bool `json:"session,omitempty"`
}

// FDSync is a forked child's sync socket (and, in a session, where each
// call's output pipes come).
const FDSync = 5

// SessionPipes is the message that carries a session call's output pipes
// on the sync socket.
const SessionPipes = "o"

// ForkExit is the fork server's report, on fd 4, that a child has ended.
type ForkExit struct {
	Type   string `json:"type"` // "exit"
	Seq    uint64 `json:"seq"`
	Code   int    `json:"code"`
	Signal int    `json:"signal,omitempty"`
	// Error explains a request the server could not fork.
	Error string `json:"error,omitempty"`
}

// ForkServer is how each forked child isolates itself before its code.
type ForkServer struct {
	UID int `json:"uid"`
	GID int `json:"gid"`
	// SeccompBPF is the jail's filter as a classic BPF program, stacked
	// on the server's own.
	SeccompBPF []byte   `json:"seccomp_bpf"`
	Masked     []string `json:"masked"`
	Readonly   []string `json:"readonly"`
	// Mounts are what each child mounts afresh in its own mount namespace,
	// in order, after it has made its mounts private: the PerJail entries
	// of package rootfs's mount table.
	Mounts []Mount `json:"mounts"`
	// TmpBytes and ShmBytes are the sizes of /tmp and /dev/shm, for a
	// runner that predates Mounts.
	TmpBytes int64 `json:"tmp_bytes"`
	ShmBytes int64 `json:"shm_bytes"`
	// Rlimits are [resource, soft, hard] triples.
	Rlimits [][3]uint64 `json:"rlimits"`
	// Warmup is trusted code the server runs once before it forks (so
	// libraries finish their lazy initialisation) and every child runs
	// again before it is ready (so the child's copy-on-write faults happen
	// before the caller's code, not during it). Its output is discarded.
	Warmup []string `json:"warmup,omitempty"`
	// PackagesMount is where a child forked with ForkRequest.Packages
	// attaches its package layer (record.PackagesMount).
	PackagesMount string `json:"packages_mount,omitempty"`
}

// Mount is one mount(2) call a forked child makes: the arguments as they
// are passed, with Flags the MS_* bits.
type Mount struct {
	Source string `json:"source,omitempty"`
	Target string `json:"target"`
	FSType string `json:"fstype,omitempty"`
	Flags  int    `json:"flags"`
	Data   string `json:"data,omitempty"`
}

// Exec is the code to run.
type Exec struct {
	Code string `json:"code"`
	// Workspace, for a forked child that was asked to wait for one
	// (ForkRequest.Workspace), is where to attach the workspace mount that
	// came on the sync socket just before this message; "" for a run
	// without a workspace.
	Workspace string `json:"workspace,omitempty"`
	// Seq numbers a session's calls from 1; its reply carries the same.
	// 0 for a single run.
	Seq int64 `json:"seq,omitempty"`
	// Op, in a session, is "checkpoint" or "restore" instead of code:
	// the call's pipes came as SessionBlob with a third descriptor, the
	// checkpoint pipe, which the runner writes the session's state to or
	// reads it from (checkpoint.py), as a call of the session, under the
	// fence of user code.
	Op string `json:"op,omitempty"`
}

// Session ops (Exec.Op). A supervisor makes such a call like any session
// call, with these differences:
//
//  1. It sends SessionBlob (not SessionPipes) on the sync socket with
//     three descriptors: the call's stdout and stderr write ends, and the
//     runner's end of a fresh pipe, the checkpoint pipe: its write end
//     for OpCheckpoint, its read end for OpRestore. It closes its own
//     copies of all three right after the sendmsg, then writes the Exec
//     with Op set (Code empty) and the call's Seq.
//  2. OpCheckpoint: it reads the checkpoint pipe to EOF while it waits
//     for the reply (the runner blocks on a full pipe) and stores the
//     bytes; OpRestore: it writes the stored bytes into the pipe and
//     closes it, also while it waits (the runner reads to EOF before it
//     loads anything). A write that fails with EPIPE means the runner
//     refused the call early; its reply says why.
//  3. The runner closes its end of the checkpoint pipe, then points fds
//     1 and 2 back at /dev/null, then writes the reply: by the time the
//     reply is read, the checkpoint pipe has reached EOF, so a reply
//     that came with status ok describes all the bytes. Reply.Checkpoint
//     says what was saved or restored; a checkpoint's Bytes is the
//     length of what it wrote.
const (
	OpCheckpoint = "checkpoint"
	OpRestore    = "restore"
)

// SessionBlob is the message that carries a checkpoint or restore
// call's output pipes and its checkpoint pipe on the sync socket.
const SessionBlob = "b"

// CheckpointReply is what a checkpoint or restore call reports.
type CheckpointReply struct {
	// Saved and Skipped, for a checkpoint, name every user name of the
	// session: saved with its bytes and kind, or skipped with why.
	Saved   []record.SavedName  `json:"saved,omitempty"`
	Skipped []record.NameReason `json:"skipped,omitempty"`
	// Bytes is the length of the stream: written, for a checkpoint; read,
	// for a restore.
	Bytes  int64  `json:"bytes,omitempty"`
	Python string `json:"python,omitempty"`
	// Restored and NotRestored, for a restore, name every name of the
	// checkpoint; a name of "*" stands for the rest of a stream cut
	// short.
	Restored    []string            `json:"restored,omitempty"`
	NotRestored []record.NameReason `json:"not_restored,omitempty"`
}

// Message is one line on fd 4.
type Message struct {
	// Type is "ready" or "reply"; an idle forked jail also says "warmed"
	// between them once its warm-up is done.
	Type  string `json:"type"`
	Reply *Reply `json:"reply,omitempty"`
	// Landlock reports the Landlock state after boot, e.g. "active (ABI 4)"
	// or "unavailable: ...". Empty when Boot.Landlock was false.
	Landlock string `json:"landlock,omitempty"`
	// Error, in a ready message, means the runner refused its Boot (an
	// unknown layer, or a restricted layer without Policy). It still reads
	// the Exec and answers it with StatusInternal, so a supervisor that
	// ignores Error fails closed.
	Error string `json:"error,omitempty"`
	// WarmupError says why the fork server's warm-up failed; the server
	// works without it, only slower.
	WarmupError string `json:"warmup_error,omitempty"`
	// Seq, in a session's reply, is the Seq of the Exec it answers; a
	// session child that cannot go on says -1 once before it exits.
	Seq int64 `json:"seq,omitempty"`
}

// Reply statuses.
const (
	StatusOK          = "ok"
	StatusError       = "error"
	StatusRejected    = "rejected"
	StatusMemoryError = "memory_error"
	// StatusInternal means the runner itself failed, not the code.
	StatusInternal = "internal"
	// StatusIncompatible: a restore found a checkpoint of another
	// format or Python version (record.ReasonIncompatibleCheckpoint).
	StatusIncompatible = "incompatible"
	// StatusCorrupt: a restore found bytes that are no checkpoint (empty,
	// or without the header) (record.ReasonCorruptCheckpoint).
	StatusCorrupt = "corrupt"
)

// Reply reports how the code ended, from inside the jail. The supervisor
// treats it as a claim by the sandbox, not as a fact: the verdict for
// limits comes from the kernel's counters.
type Reply struct {
	Status         string             `json:"status"`
	Value          *string            `json:"value,omitempty"`
	ValueTruncated bool               `json:"value_truncated,omitempty"`
	Exception      string             `json:"exception,omitempty"`
	Message        string             `json:"message,omitempty"`
	Rejections     []record.Rejection `json:"rejections,omitempty"`
	Images         []record.Image     `json:"images,omitempty"`
	// ImagesTruncated reports that figures were dropped at Boot.ImageBytes.
	ImagesTruncated bool `json:"images_truncated,omitempty"`
	ExitCode        int  `json:"exit_code"`
	// Checkpoint reports a checkpoint or restore call (Exec.Op).
	Checkpoint *CheckpointReply `json:"checkpoint,omitempty"`
}
