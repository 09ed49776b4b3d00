package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/workspace/dirlock"
)

// Exit statuses of `pyjail run`.
const (
	exitOK       = 0
	exitNotOK    = 1 // the code ran (or was refused) and the verdict is not ok
	exitUsage    = 2
	exitInternal = 3 // the sandbox could not run the code
)

func cmdRun(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		common    commonFlags
		profile   = fs.String("profile", string(record.ProfileFull), "profile: calc, workspace or full")
		workspace = fs.String("workspace", "", "host directory mounted read-write at "+record.WorkspaceMount)
		timeout   = fs.Float64("timeout", 0, "wall-clock limit in seconds (default: the profile's)")
		memory    = fs.Int64("memory", 0, "memory limit in MiB (may only lower the profile's)")
		asJSON    = fs.Bool("json", false, "print the result record as JSON instead of the program's output")
		code      = fs.String("c", "", "code to run")
	)
	common.registerLevel(fs, "warn")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	src, err := readSource(*code, fs.Args(), stdin)
	if err != nil {
		fmt.Fprintf(stderr, "pyjail run: %v\n", err)
		return exitUsage
	}
	log, err := newLogger(stderr, common.logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "pyjail run: %v\n", err)
		return exitUsage
	}
	if *timeout < 0 || *memory < 0 {
		fmt.Fprintln(stderr, "pyjail run: --timeout and --memory must not be negative")
		return exitUsage
	}
	j, cfg, _, err := common.newJail(ctx, log)
	if err != nil {
		fmt.Fprintf(stderr, "pyjail run: %v\n", err)
		return exitInternal
	}
	prof, err := cfg.Profile(record.Profile(*profile))
	if err != nil {
		fmt.Fprintf(stderr, "pyjail run: %v\n", err)
		return exitUsage
	}
	if *workspace != "" && !prof.Workspace {
		fmt.Fprintf(stderr, "pyjail run: profile %q has no workspace; use --profile workspace or full\n", *profile)
		return exitUsage
	}
	req := record.Request{
		Profile:     record.Profile(*profile),
		Code:        src,
		Timeout:     time.Duration(*timeout * float64(time.Second)),
		MemoryBytes: *memory * policy.MiB,
		Workspace:   *workspace,
	}
	if *workspace != "" {
		// The workspace lock a server's runs take, shared (issue 27): a
		// server's snapshot restore, exclusive, waits for this run to
		// end, and this run for a restore in progress.
		unlock, err := lockWorkspace(ctx, *workspace)
		if err != nil {
			fmt.Fprintf(stderr, "pyjail run: %v\n", err)
			return exitInternal
		}
		defer unlock()
	}
	res, err := j.Run(ctx, req)
	// The jail is torn down after the answer; wait for it before exiting.
	j.Wait()
	if err != nil {
		fmt.Fprintf(stderr, "pyjail run: %v\n", err)
		return exitInternal
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return exitInternal
		}
	} else {
		io.WriteString(stdout, res.Stdout)
		if res.Value != nil {
			fmt.Fprintln(stdout, *res.Value)
		}
		io.WriteString(stderr, res.Stderr)
		if !res.OK() {
			fmt.Fprintf(stderr, "pyjail: %s: %s\n", res.Verdict, res.Message)
		}
	}
	switch res.Verdict {
	case record.VerdictOK:
		return exitOK
	case record.VerdictInternalError:
		return exitInternal
	default:
		return exitNotOK
	}
}

// lockWorkspace takes the shared workspace lock of dir
// (dirlock.WorkspaceLockFile), waiting while a restore holds it. Where the
// lock file cannot be made (a parent the caller cannot write) or locked
// (a filesystem without OFD locks), the run goes ahead unlocked, as a
// server there has no cross-process lock either.
func lockWorkspace(ctx context.Context, dir string) (func(), error) {
	lk, err := dirlock.Open(dirlock.WorkspaceLockFile(dir))
	if err != nil || !lk.CrossProcess() {
		return func() {}, nil
	}
	unlock, err := lk.RLock(ctx)
	if err != nil {
		return nil, fmt.Errorf("waiting for the lock of workspace %q: %w", dir, err)
	}
	return unlock, nil
}

// readSource takes the code from -c, a file argument, or "-" for stdin.
func readSource(code string, args []string, stdin io.Reader) (string, error) {
	switch {
	case code != "" && len(args) > 0:
		return "", fmt.Errorf("give the code either with -c or as a file, not both")
	case code != "":
		return code, nil
	case len(args) == 1 && args[0] == "-":
		b, err := io.ReadAll(io.LimitReader(stdin, 64<<20))
		return string(b), err
	case len(args) == 1:
		b, err := os.ReadFile(args[0])
		if err != nil {
			return "", fmt.Errorf("reading code: %w", err)
		}
		return string(b), nil
	case len(args) == 0:
		return "", fmt.Errorf("no code: use -c CODE, a FILE, or - for stdin")
	default:
		return "", fmt.Errorf("expected one FILE, got %d arguments", len(args))
	}
}
