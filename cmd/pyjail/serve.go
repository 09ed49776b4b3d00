package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/pyjail/pyjail/jail"
	"github.com/pyjail/pyjail/mcpserver"
	"github.com/pyjail/pyjail/mcpserver/validate"
	"github.com/pyjail/pyjail/mcpserver/validatepool"
	"github.com/pyjail/pyjail/policy"
)

// defaultDataDir is where serve keeps the workspace and snapshots.
func defaultDataDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/pyjail"
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return d + "/pyjail"
	}
	home, _ := os.UserHomeDir()
	return home + "/.local/share/pyjail"
}

func cmdServe(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var common commonFlags
	data := defaultDataDir()
	workspace := fs.String("workspace", data+"/workspace", "workspace directory for run_sandbox_code, the file tools and snapshots")
	snapshots := fs.String("snapshots", data+"/snapshots", "directory that stores workspace snapshots")
	noWarm := fs.Bool("no-warm", false, "disable the pools of pre-started jails (every run starts cold)")
	common.register(fs)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "pyjail serve: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	log, err := newLogger(stderr, common.logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "pyjail serve: %v\n", err)
		return exitUsage
	}
	for _, d := range []string{*workspace, *snapshots} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			fmt.Fprintf(stderr, "pyjail serve: creating %q: %v\n", d, err)
			return exitInternal
		}
	}
	j, cfg, layout, err := common.newJail(ctx, log)
	if err != nil {
		fmt.Fprintf(stderr, "pyjail serve: %v\n", err)
		return exitInternal
	}
	// Deferred first, so it runs last: after the pool is closed, wait for
	// every jail's teardown.
	defer j.Wait()
	var runner mcpserver.Runner = j
	if !*noWarm {
		pool := jail.NewPool(j, *workspace)
		// Close on every exit path: idle jails must not outlive the server
		// (they would die with it anyway through PR_SET_PDEATHSIG).
		defer func() { _ = pool.Close() }()
		runner = pool
	}
	// sandbox://status shows which rootfs the jails use next to the layers.
	host := j.Host()
	host.Layers = append(host.Layers, policy.Layer{
		Name: "rootfs", Required: true, Active: true,
		Detail: fmt.Sprintf("%s rootfs at %s", layout.Kind, layout.Root),
	}, jail.ProbeWorkspace(*workspace, cfg))
	// The JSON Schema validation workers start now, so that the first
	// validate_json finds them warm, and stop with the server.
	schemas, err := validate.NewRegistry(cfg.SchemaDir, validate.DefaultLimits())
	if err != nil {
		fmt.Fprintf(stderr, "pyjail serve: loading schemas: %v\n", err)
		return exitInternal
	}
	poolCfg := mcpserver.PoolConfig(schemas, cfg.Server, log)
	poolCfg.Prestart = true
	validators, err := validatepool.New(poolCfg)
	if err != nil {
		fmt.Fprintf(stderr, "pyjail serve: %v\n", err)
		return exitInternal
	}
	defer func() { _ = validators.Close() }()
	srv, err := mcpserver.New(mcpserver.Config{
		Policy:      cfg,
		Runner:      runner,
		Validators:  schemas,
		Validator:   validators,
		Workspace:   *workspace,
		SnapshotDir: *snapshots,
		Version:     version,
		Host:        host,
		Environment: func(ctx context.Context) (any, error) { return j.Environment(ctx) },
		Logger:      log,
	})
	if err != nil {
		fmt.Fprintf(stderr, "pyjail serve: %v\n", err)
		return exitInternal
	}
	log.Info("serving MCP on stdio", "version", version, "rootfs", string(layout.Kind), "workspace", *workspace)
	if err := srv.ServeStdio(ctx, stdin, stdout); err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "pyjail serve: %v\n", err)
		return exitInternal
	}
	return exitOK
}
