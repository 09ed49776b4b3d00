// Package validatepool runs JSON Schema validation in a small pool of warm
// worker processes, each call under a CPU and wall-clock budget that the
// kernel and a supervisor enforce.
//
// JSON Schema validation can be exponential in the schema (forty $defs
// that each apply the next one twice through allOf, anyOf, oneOf or
// if/then) and in the data (a recursive anyOf over deeply nested arrays),
// and github.com/santhosh-tekuri/jsonschema/v6's Validate takes no
// context and has no step hook. A budget inside the validator would have
// to anticipate every keyword combination; a process boundary does not.
// Every compilation and validation of a caller's schema, and every
// validation of caller's data, therefore runs in a worker: the same binary
// re-executed with [WorkerArg] (cmd/pyjail dispatches it to [Main]),
// talking length-prefixed JSON frames over its stdin and stdout.
//
// The supervisor ([Pool]) enforces, for each call:
//
//  1. a wall-clock budget (Config.Timeout, 1 s by default): when it runs
//     out, or the caller's context is cancelled, the worker is killed with
//     SIGKILL, the call returns a [*BudgetError] (or the context's error),
//     and a fresh worker is started in the background;
//  2. one CPU at most: workers run with GOMAXPROCS=1 and at nice 10, so a
//     call costs at most about Timeout of CPU and yields to jails and to
//     the server's other work;
//  3. a kernel backstop: RLIMIT_CPU is set before every call to the CPU
//     the worker has used plus the budget plus one second, so even a
//     supervisor that failed to kill it cannot let a call run on (raising
//     the hard limit per call needs CAP_SYS_RESOURCE; without it the limit
//     is a lifetime cap and workers are recycled before they reach it);
//  4. memory: RLIMIT_DATA caps each worker (Config.MemoryBytes, 512 MiB
//     by default) and RLIMIT_AS its address space, with GOMEMLIMIT set
//     below them so that the Go runtime collects before it fails;
//  5. no privileges: workers started by root run as nobody (65534), with
//     no_new_privs, RLIMIT_NOFILE 64, RLIMIT_FSIZE 0 and no core dumps;
//     they read nothing but their stdin, and die with the server
//     (PR_SET_PDEATHSIG).
//
// Workers are started lazily (or up front with Config.Prestart) and hold
// the server's registered schemas, sent in the first frame, so a call
// costs one round trip over a pipe: about a tenth of a millisecond more
// than validating in process.
//
// The package keeps no package-level state. A Pool is safe for concurrent
// use; Close stops its workers.
package validatepool
