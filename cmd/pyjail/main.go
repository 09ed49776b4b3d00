package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/pyjail/pyjail/jail"
	"github.com/pyjail/pyjail/jail/rootless"
	"github.com/pyjail/pyjail/mcpserver/validatepool"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// The only init in the program: a jail's init is this binary re-executed,
// and it must take over before flags are parsed or a server starts.
func init() {
	if jail.IsInit(os.Args) {
		jail.Init()
	}
}

const usage = `pyjail runs Python for LLMs in kernel-isolated jails.

Usage:
  pyjail serve  [--config FILE] [--workspace DIR] [--snapshots DIR] [--rootfs DIR]
  pyjail run    [--profile calc|workspace|full] [--workspace DIR] [--timeout S] [--memory MiB] [--json] (-c CODE | FILE | -)
  pyjail doctor [--config FILE] [--rootfs DIR] [--json]
  pyjail rootfs build|verify|info [--dir DIR]
  pyjail sweep  [--config FILE]
  pyjail token  add|list|remove [--tokens FILE] [NAME]
  pyjail bench  [flags]
  pyjail version

Run "pyjail COMMAND -h" for a command's flags.
`

func main() {
	if len(os.Args) > 1 && needsJails[os.Args[1]] {
		// Not root: start rootless, in a user namespace of our own
		// (jail/rootless). The first execution waits in Enter for
		// the second to exit; doctor reports a failure instead.
		if err := rootless.Enter(); err != nil && os.Args[1] != "doctor" {
			fmt.Fprintf(os.Stderr, "pyjail %s: %v\n", os.Args[1], err)
			os.Exit(1)
		}
	}
	if len(os.Args) > 1 && servesJails[os.Args[1]] {
		// Root now (host root, or rootless in a user namespace whose id
		// maps are written): the server's own deny filter, before any
		// jail is built, so every jail inherits it too (policy.ServerDeny).
		if _, err := jail.LoadServerFilter(); err != nil {
			fmt.Fprintf(os.Stderr, "pyjail %s: %v\n", os.Args[1], err)
			os.Exit(1)
		}
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// servesJails are the commands that load the server's seccomp filter
// first thing (doctor loads and reports it as its server_filter layer).
var servesJails = map[string]bool{"serve": true, "run": true, "bench": true}

// needsJails are the commands that build jails, and so run rootless when
// started by a user other than root.
var needsJails = map[string]bool{"serve": true, "run": true, "bench": true, "doctor": true}

// run dispatches a command and returns the process exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd, rest := args[0], args[1:]
	if cmd == "serve" || cmd == "bench" {
		// Long-running commands that start many jails seal their binary
		// once, so that libcontainer need not for every container.
		if err := jail.SealSelf(); err != nil {
			fmt.Fprintf(stderr, "pyjail %s: %v (containers will each seal their own copy)\n", cmd, err)
		}
	}
	switch cmd {
	case "serve":
		return cmdServe(ctx, rest, stdin, stdout, stderr)
	case "run":
		return cmdRun(ctx, rest, stdin, stdout, stderr)
	case "doctor":
		return cmdDoctor(ctx, rest, stdout, stderr)
	case "rootfs":
		return cmdRootfs(ctx, rest, stdout, stderr)
	case "bench":
		return cmdBench(ctx, rest, stdout, stderr)
	case "token":
		return cmdToken(rest, stdout, stderr)
	case "sweep":
		return cmdSweep(ctx, rest, stdout, stderr)
	case validatepool.WorkerArg:
		// Hidden: the server re-executes itself as a JSON Schema
		// validation worker (see mcpserver/validatepool).
		return validatepool.Main(stdin, stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintf(stdout, "pyjail %s\n", version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "pyjail: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
}

// newLogger returns the structured logger every command uses: text on
// stderr, because stdout belongs to the protocol or the program.
func newLogger(stderr io.Writer, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("parsing log level %q: %w", level, err)
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv})), nil
}
