package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/pyjail/pyjail/bench"
	"github.com/pyjail/pyjail/record"
)

func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		common      commonFlags
		runs        = fs.Int("runs", 50, "timed executions per latency case (after one warm-up round)")
		concurrency = fs.Int("concurrency", 4, "concurrent callers in the throughput phase")
		duration    = fs.Duration("duration", 10*time.Second, "length of each throughput phase")
		profile     = fs.String("profile", string(record.ProfileCalc), "profile the jails run")
		asJSON      = fs.Bool("json", false, "print the report as JSON")
		cpuProfile  = fs.String("cpu-profile", "", "directory for a pprof CPU profile of the supervisor during the warm throughput phase")
	)
	common.register(fs)
	// One log line per execution would bury the table.
	fs.Lookup("log-level").DefValue = "warn"
	_ = fs.Set("log-level", "warn")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *runs < 1 || *concurrency < 1 || *duration <= 0 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "pyjail bench: --runs, --concurrency and --duration must be positive; no arguments")
		return exitUsage
	}
	log, err := newLogger(stderr, common.logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "pyjail bench: %v\n", err)
		return exitUsage
	}
	cfg, err := common.loadConfig()
	if err != nil {
		fmt.Fprintf(stderr, "pyjail bench: %v\n", err)
		return exitUsage
	}
	layout, err := common.openRootfs(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "pyjail bench: opening rootfs: %v\n", err)
		return exitInternal
	}
	rep, err := bench.Run(ctx, bench.Options{
		Policy: cfg, Rootfs: layout, Logger: log, Version: version,
		Runs: *runs, Concurrency: *concurrency, Duration: *duration, Profile: record.Profile(*profile),
		CPUProfileDir: *cpuProfile,
	})
	if err != nil {
		fmt.Fprintf(stderr, "pyjail bench: %v\n", err)
		return exitInternal
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return exitInternal
		}
		return exitOK
	}
	bench.WriteText(stdout, rep)
	return exitOK
}
