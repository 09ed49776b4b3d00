package policy

import "github.com/pyjail/pyjail/record"

// PythonLayer selects the in-process fence the runner puts around the code.
type PythonLayer string

// Python layers, one per profile of SPEC §3.
const (
	// LayerCalc: builtins whitelist, calculator modules in scope, import
	// deny-list.
	LayerCalc PythonLayer = "calc"
	// LayerWorkspace: AST checker, import deny-list, open() confined to the
	// workspace.
	LayerWorkspace PythonLayer = "workspace"
	// LayerNone: full Python; the kernel layer alone contains the code.
	LayerNone PythonLayer = "none"
)

// Profile is one way of running code: limits, Python layer, workspace and
// warm pool. The names are fixed by SPEC §3.
type Profile struct {
	Name   record.Profile `json:"-"`
	Python PythonLayer    `json:"python"`
	// Workspace mounts the workspace read-write at /sandbox/workspace and
	// makes it the working directory.
	Workspace bool   `json:"workspace"`
	Limits    Limits `json:"limits"`
	// Warm configures pre-started jails for this profile.
	Warm Warm `json:"warm"`
	// Egress opens the network through the host's gateway (SPEC §12);
	// nil, the default, means no network.
	Egress *Egress `json:"egress,omitempty"`
}

// Warm configures the pool of pre-started single-use jails of a profile.
type Warm struct {
	// Size is the number of idle jails kept ready; 0 disables the pool.
	Size int `json:"size"`
	// Preload lists modules each idle jail imports before it waits.
	Preload []string `json:"preload,omitempty"`
	// Refill is how many jails are started in parallel when refilling.
	Refill int `json:"refill"`
	// MemoryBudgetBytes caps the memory charged to this profile's idle jails,
	// and with ForkServer the fork server's own memory too.
	MemoryBudgetBytes int64 `json:"memory_budget_bytes"`
	// ForkServer makes idle jails by forking a long-lived interpreter that
	// has already imported Preload, instead of starting a container for
	// each: a fork costs milliseconds where a container with the scientific
	// stack costs a second of CPU. Each fork still gets fresh pid, mount,
	// net, ipc and uts namespaces, its own cgroup, /proc, /tmp and
	// /dev/shm, and the jail's seccomp filter, and serves one execution.
	// A child of a profile with a workspace attaches the workspace of its
	// run when its code comes, in its own mount namespace: the server has
	// none, so one server serves any workspace.
	ForkServer bool `json:"fork_server,omitempty"`
	// RecycleAfter replaces a fork server with a fresh one after that many
	// forks (0: never). Forked jails share their server's address-space
	// layout and string-hash seed; this bounds how many do.
	RecycleAfter int `json:"recycle_after,omitempty"`
	// Warmup is code a fork server runs once before it forks (libraries
	// finish their lazy initialisation there), and each idle forked jail
	// again while it waits for code, at the lowest CPU weight and only
	// until code arrives, with output discarded: a forked interpreter pays
	// a copy-on-write fault for every page its first run touches, and
	// this moves that cost off the caller's clock. Trusted like Preload:
	// it comes from the operator's configuration, never from a request.
	Warmup []string `json:"warmup,omitempty"`
}

// DefaultProfiles returns the three profiles of SPEC §3 with default limits.
func DefaultProfiles() map[record.Profile]Profile {
	calcPreload := []string{"numpy", "pandas", "scipy", "sympy"}
	// What calculator runs typically touch first: output, a numpy
	// reduction, a pandas groupby. Every idle jail pays for its warm-up in
	// the background, so each snippet must save a run more than it costs
	// the machine: a DataFrame repr and describe() were dropped after
	// measuring (with calls 100 ms apart, the pool fell behind and numpy
	// and pandas runs took twice as long), and sympy and scipy calls cost
	// more to warm than most runs spend in them.
	calcWarmup := []string{
		"print(1+1)",
		"repr(np.arange(10**6).sum())",
		"df = pd.DataFrame({'k': ['a', 'b', 'a'], 'v': [1, 2, 3]})\nprint(df.groupby('k')['v'].sum().to_dict())",
	}
	// The workspace profile's jails read and write data files and draw
	// figures: its fork server preloads pandas and matplotlib too. Its
	// warm-up is a read and a groupby (never a file write: an idle child
	// warms up before it is the sandbox user); its scope binds nothing, so
	// the snippets import what they use. A figure was dropped after
	// measuring: with calls 50 ms apart the idle jails never finished it,
	// and every call waited for the rest of the snippet (print p50 58 ms
	// with it, 7.8 ms without; a plot 171 ms against 123 ms).
	wsPreload := []string{"numpy", "pandas", "matplotlib.pyplot"}
	wsWarmup := []string{
		"print(1+1)",
		"import io, pandas as pd\ndf = pd.read_csv(io.StringIO('k,v\\na,1\\nb,2\\na,3\\n'))\nprint(df.groupby('k')['v'].sum().to_dict())",
	}
	return map[record.Profile]Profile{
		record.ProfileCalc: {
			Name: record.ProfileCalc, Python: LayerCalc, Limits: DefaultLimits(),
			Warm: Warm{Size: 4, Preload: calcPreload, Refill: 1, MemoryBudgetBytes: 512 * MiB, ForkServer: true, RecycleAfter: 500, Warmup: calcWarmup},
		},
		record.ProfileWorkspace: {
			Name: record.ProfileWorkspace, Python: LayerWorkspace, Workspace: true, Limits: DefaultLimits(),
			Warm: Warm{Size: 4, Preload: wsPreload, Refill: 1, MemoryBudgetBytes: 512 * MiB, ForkServer: true, RecycleAfter: 500, Warmup: wsWarmup},
		},
		record.ProfileFull: {
			Name: record.ProfileFull, Python: LayerNone, Workspace: true, Limits: DefaultLimits(),
		},
	}
}
