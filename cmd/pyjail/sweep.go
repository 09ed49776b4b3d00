package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/pyjail/pyjail/jail"
)

// cmdSweep removes what pyjail processes that are gone left behind (their
// containers, state and cgroups) without starting a server: the root
// unit's ExecStopPost=, so that a killed server's leftovers go when the
// unit stops, not at its next start (issue 27). Jails of live servers
// sharing the state dir are left alone.
func cmdSweep(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var common commonFlags
	common.register(fs)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	cfg, err := common.loadConfig()
	if err != nil {
		fmt.Fprintf(stderr, "pyjail sweep: %v\n", err)
		return exitUsage
	}
	log, err := newLogger(stderr, common.logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "pyjail sweep: %v\n", err)
		return exitUsage
	}
	if err := jail.Sweep(ctx, cfg, log); err != nil {
		fmt.Fprintf(stderr, "pyjail sweep: %v\n", err)
		return 1
	}
	return 0
}
