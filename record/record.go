package record

import "time"

// Verdict names the outcome of an execution. The set is closed: clients
// switch on these strings, so adding one is a protocol change.
type Verdict string

// The verdicts of SPEC §4, from best to worst.
const (
	// VerdictOK means the code ran to completion and exited 0.
	VerdictOK Verdict = "ok"
	// VerdictError means the code raised an exception or exited nonzero.
	VerdictError Verdict = "error"
	// VerdictRejected means the Python layer refused the code before running it.
	VerdictRejected Verdict = "rejected"
	// VerdictTimeout means the wall-clock deadline passed and the jail was killed.
	VerdictTimeout Verdict = "timeout"
	// VerdictCPULimit means the CPU-time limit was reached.
	VerdictCPULimit Verdict = "cpu_limit"
	// VerdictMemoryLimit means the memory limit was reached: an OOM kill in
	// the cgroup, or a MemoryError raised at the address-space limit.
	VerdictMemoryLimit Verdict = "memory_limit"
	// VerdictOutputLimit means stdout or stderr exceeded its cap.
	VerdictOutputLimit Verdict = "output_limit"
	// VerdictNetworkLimit means the run passed an egress limit of its
	// profile (connections, bytes in or bytes out) and was ended.
	VerdictNetworkLimit Verdict = "network_limit"
	// VerdictQuotaExceeded means the run's writes took the workspace past
	// its tenant's quota (workspace_bytes, workspace_files): what the run
	// created was removed again, and the message names the quota.
	VerdictQuotaExceeded Verdict = "quota_exceeded"
	// VerdictInternalError means the sandbox itself failed; the code may not
	// have run at all.
	VerdictInternalError Verdict = "internal_error"
)

// Verdicts lists every verdict, for schemas and documentation.
func Verdicts() []Verdict {
	return []Verdict{
		VerdictOK, VerdictError, VerdictRejected, VerdictTimeout, VerdictCPULimit,
		VerdictMemoryLimit, VerdictOutputLimit, VerdictNetworkLimit, VerdictQuotaExceeded, VerdictInternalError,
	}
}

// Valid reports whether v is one of the defined verdicts.
func (v Verdict) Valid() bool {
	for _, w := range Verdicts() {
		if v == w {
			return true
		}
	}
	return false
}

// Profile names a policy profile of SPEC §3.
type Profile string

// The profiles of SPEC §3.
const (
	ProfileCalc      Profile = "calc"
	ProfileWorkspace Profile = "workspace"
	ProfileFull      Profile = "full"
)

// Profiles lists every profile.
func Profiles() []Profile {
	return []Profile{ProfileCalc, ProfileWorkspace, ProfileFull}
}

// Valid reports whether p is one of the defined profiles.
func (p Profile) Valid() bool {
	for _, w := range Profiles() {
		if p == w {
			return true
		}
	}
	return false
}

// Request is one execution to run in a fresh jail.
type Request struct {
	// Profile selects the kernel limits and the Python layer.
	Profile Profile
	// Code is the Python source to run.
	Code string
	// Timeout is the wall-clock limit; zero means the profile's default. The
	// caller's context deadline, if earlier, wins.
	Timeout time.Duration
	// Queued is how long the call already waited for a free jail before
	// this request: Timeout is then what is left of the caller's limit,
	// and a timeout's message names the whole of it.
	Queued time.Duration
	// MemoryBytes overrides the profile's memory limit when nonzero; it may
	// only lower it below the configured maximum.
	MemoryBytes int64
	// Workspace is the host directory mounted read-write at WorkspaceMount,
	// or "" for none. Profiles without a workspace ignore it.
	Workspace string
	// Session, when set, runs the code in the stateful session of that key
	// (SPEC §11), creating it if none is live: an opaque string chosen by
	// the caller, who makes keys of different owners differ (mcpserver
	// uses "<owner>/<name>"). "" runs the code in a fresh jail.
	Session string
	// EgressHosts, when non-nil, narrows the profile's egress allowlist
	// to these host patterns (a tenant's entry in the tokens file); a
	// pattern outside the profile's rules fails the run.
	EgressHosts []string
	// Packages is the host directory of the caller's package layer (SPEC
	// §13), mounted read-only at PackagesMount and appended to sys.path
	// after the rootfs and the runner; "" for none. A run with a layer
	// takes no idle jail (those serve anyone): a fork server forks one
	// for it with the layer attached, else a container starts.
	Packages string
}

// PackagesMount is where a run's package layer appears inside the jail:
// under the per-jail /tmp, so that the mount point never has to exist in
// the (read-only, shared) rootfs.
const PackagesMount = "/tmp/.pyjail-packages"

// WorkspaceMount is where the workspace appears inside the jail; it is
// also the working directory of code that has a workspace.
const WorkspaceMount = "/sandbox/workspace"

// Result is the typed record of one execution (SPEC §4). Its JSON form is
// the `--json` output of `pyjail run` and the structured content of the MCP
// run tools.
type Result struct {
	Verdict  Verdict `json:"verdict"`
	Profile  Profile `json:"profile"`
	ExitCode int     `json:"exit_code"`
	// Signal is the name of the signal that killed the program ("SIGKILL"),
	// or "" if it exited.
	Signal string `json:"signal,omitempty"`
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	// Value is the repr of the last expression statement, if the code ended
	// with one and it was not None.
	Value *string `json:"value,omitempty"`
	// Truncated marks which streams were cut at the output cap.
	Truncated Truncated `json:"truncated"`
	// Message explains a non-ok verdict in plain words, e.g. "memory limit
	// of 256 MiB exceeded (peak 256 MiB)".
	Message string `json:"message,omitempty"`
	// Rejections lists the Python-layer rules that refused the code.
	Rejections []Rejection `json:"rejections,omitempty"`
	// Exception is the exception type name when the code raised one.
	Exception string `json:"exception,omitempty"`

	WallMS          int64 `json:"wall_ms"`
	CPUMS           int64 `json:"cpu_ms"`
	PeakMemoryBytes int64 `json:"peak_memory_bytes"`

	// Files lists workspace changes; nil for runs without a workspace.
	Files *FileChanges `json:"files,omitempty"`
	// Images holds the PNG figures the code drew with matplotlib.
	Images []Image `json:"images,omitempty"`
	// Warm reports whether a pre-started jail served the request.
	Warm bool `json:"warm"`
	// Session is the state of the session a session call ran in; nil for
	// calls without one.
	Session *SessionState `json:"session,omitempty"`
	// Network lists the run's network attempts, allowed or refused, for
	// profiles with egress (SPEC §12); nil for profiles without.
	Network []NetworkEntry `json:"network,omitempty"`
	// NetworkOmitted counts the attempts left out of Network past its cap.
	NetworkOmitted int `json:"network_omitted,omitempty"`
	// Start says how the jail that ran the code was made: StartWarm,
	// StartForked or StartCold; "" when no jail ran it (a refusal).
	Start string `json:"start,omitempty"`
}

// How a run's jail was made (Result.Start).
const (
	// StartWarm: taken ready for code from a warm pool.
	StartWarm = "warm"
	// StartForked: forked from a fork server for this run.
	StartForked = "forked"
	// StartCold: a container started for this run.
	StartCold = "cold"
)

// Truncated flags the streams that were cut.
type Truncated struct {
	Stdout bool `json:"stdout"`
	Stderr bool `json:"stderr"`
	Value  bool `json:"value"`
}

// Rejection is one Python-layer rule violation found before execution.
type Rejection struct {
	// Rule is a stable ID such as "PJ001"; see policy for the table.
	Rule    string `json:"rule"`
	Message string `json:"message"`
	Line    int    `json:"line"`
	Col     int    `json:"col"`
}

// FileChanges lists what an execution did to its workspace.
type FileChanges struct {
	Created  []FileInfo `json:"created"`
	Modified []FileInfo `json:"modified"`
	Deleted  []FileInfo `json:"deleted"`
	// Error, when set, says in plain words why the lists are empty: the
	// changes could not be listed, e.g. "workspace has more than 64
	// nested directories (at \"d/d/…\"); the limit is 64".
	Error string `json:"error,omitempty"`
}

// FileInfo describes one workspace file, by path relative to the workspace.
type FileInfo struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
}

// Image is a figure produced by the code, as PNG bytes in base64.
type Image struct {
	MIMEType string `json:"mime_type"`
	Data     string `json:"data"`
}

// OK reports whether the verdict is ok.
func (r *Result) OK() bool { return r.Verdict == VerdictOK }

// Network attempt verdicts (NetworkEntry.Verdict).
const (
	// NetAllowed: the gateway connected the attempt to its upstream.
	NetAllowed = "allowed"
	// NetRefused: the gateway refused it; Reason says why.
	NetRefused = "refused"
	// NetLimit: the attempt passed, or came after, a limit of the run.
	NetLimit = "network_limit"
)

// NetworkEntry is one connection or request a jail made through the
// egress gateway. Header values and payloads are never recorded.
type NetworkEntry struct {
	// Scheme is "https" for a CONNECT tunnel, "http" for a plain request.
	Scheme string `json:"scheme"`
	Host   string `json:"host"`
	Port   int    `json:"port"`
	// Method and Path are set where the gateway saw the request (plain
	// HTTP); a tunnel's are hidden inside its TLS.
	Method string `json:"method,omitempty"`
	Path   string `json:"path,omitempty"`
	// Verdict is NetAllowed, NetRefused or NetLimit.
	Verdict string `json:"verdict"`
	// Reason says in one sentence why it was refused or cut.
	Reason   string `json:"reason,omitempty"`
	BytesIn  int64  `json:"bytes_in"`
	BytesOut int64  `json:"bytes_out"`
	MS       int64  `json:"ms"`
}
