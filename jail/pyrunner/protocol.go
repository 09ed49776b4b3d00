package pyrunner

import (
	_ "embed"

	"github.com/pyjail/pyjail/jail/record"
)

// Source is the runner's Python source, placed read-only in every jail at
// Path.
//
//go:embed runner.py
var Source []byte

// Path is where the runner lives inside the jail.
const Path = "/opt/pyjail/runner.py"

// FileName is the runner's file name inside RunnerDir.
const FileName = "runner.py"

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
	// ValueBytes caps the repr of the last expression.
	ValueBytes int `json:"value_bytes"`
	// ImageBytes caps the total size of captured figures.
	ImageBytes int `json:"image_bytes"`
	// Landlock asks the runner to restrict itself with Landlock when the
	// kernel supports it.
	Landlock bool `json:"landlock"`
	// Policy is the Python-layer policy (deny-list, builtins, AST rules),
	// as returned by policy.PythonPolicy for Layer. The runner refuses to
	// run code in "calc" or "workspace" without it (fail closed).
	Policy map[string]any `json:"policy,omitempty"`
}

// Exec is the code to run.
type Exec struct {
	Code string `json:"code"`
}

// Message is one line on fd 4.
type Message struct {
	// Type is "ready" or "reply".
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
}

// Reply statuses.
const (
	StatusOK          = "ok"
	StatusError       = "error"
	StatusRejected    = "rejected"
	StatusMemoryError = "memory_error"
	// StatusInternal means the runner itself failed, not the code.
	StatusInternal = "internal"
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
}
