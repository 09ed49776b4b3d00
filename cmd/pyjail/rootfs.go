package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/rootfs"
)

const rootfsUsage = `Usage:
  pyjail rootfs build  [--dir DIR] [--suite S] [--packages A,B] [--recipe FILE] [--force]
                                                          build a Python rootfs from Debian packages
  pyjail rootfs verify [--dir DIR] [--quick]               recompute its tree hash and name what changed
  pyjail rootfs info   [--dir DIR] [--json]                print its manifest
`

func cmdRootfs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, rootfsUsage)
		return exitUsage
	}
	sub, rest := args[0], args[1:]
	fs := flag.NewFlagSet("rootfs "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", rootfs.DefaultDir(), "rootfs directory")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	switch sub {
	case "build":
		suite := fs.String("suite", "", "Debian suite (default: the host's)")
		force := fs.Bool("force", false, "rebuild even if the existing rootfs has the same recipe")
		packages := fs.String("packages", "", "comma-separated Debian packages to add to the default set")
		recipeFile := fs.String("recipe", "", "a recipe file: one Debian package per line, optionally followed by modules to import as a check")
		if err := fs.Parse(rest); err != nil {
			return exitUsage
		}
		log, err := newLogger(stderr, *logLevel)
		if err != nil {
			fmt.Fprintf(stderr, "pyjail rootfs: %v\n", err)
			return exitUsage
		}
		extra, err := readRecipe(*packages, *recipeFile)
		if err != nil {
			fmt.Fprintf(stderr, "pyjail rootfs build: %v\n", err)
			return exitUsage
		}
		opt := rootfs.BuildOptions{Dir: *dir, Suite: *suite, Force: *force, Log: log, IDs: policy.Default().IDMap, Extra: extra}
		// Progress on a terminal, quiet otherwise (CI logs stay short).
		if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			opt.Progress = stderr
		}
		start := time.Now()
		m, err := rootfs.Build(ctx, opt)
		if err != nil {
			fmt.Fprintf(stderr, "pyjail rootfs build: %v\n", err)
			return exitInternal
		}
		fmt.Fprintf(stdout, "rootfs ready at %s: %d packages, %d MiB, tree %s (%.0fs)\n",
			*dir, len(m.Packages), m.Tree.Bytes>>20, m.Tree.Hash, time.Since(start).Seconds())
		return exitOK
	case "verify":
		quick := fs.Bool("quick", false, "compare metadata only (sizes, modes, owners), not file contents")
		if err := fs.Parse(rest); err != nil {
			return exitUsage
		}
		mode := rootfs.VerifyFull
		if *quick {
			mode = rootfs.VerifyMetadata
		}
		start := time.Now()
		m, err := rootfs.VerifyWith(*dir, mode)
		if err != nil {
			fmt.Fprintf(stderr, "pyjail rootfs verify: %v\n", err)
			return exitNotOK
		}
		fmt.Fprintf(stdout, "rootfs %s verified: %d entries, tree %s (%.1fs)\n", *dir, m.Tree.Entries, m.Tree.Hash, time.Since(start).Seconds())
		return exitOK
	case "info":
		asJSON := fs.Bool("json", false, "print the manifest as JSON")
		if err := fs.Parse(rest); err != nil {
			return exitUsage
		}
		m, err := rootfs.ReadManifest(*dir)
		if err != nil {
			fmt.Fprintf(stderr, "pyjail rootfs info: %v\n", err)
			return exitNotOK
		}
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(m)
			return exitOK
		}
		fmt.Fprintf(stdout, "dir:      %s\nsuite:    %s (%s)\nbuilt:    %s in %.0fs with %s\ntree:     %s, %d entries, %d MiB\nsources:  %v\n",
			*dir, m.Suite, m.Arch, m.BuiltAt.Format(time.RFC3339), m.BuildSeconds, m.Tool, m.Tree.Hash, m.Tree.Entries, m.Tree.Bytes>>20, m.Sources)
		names := make([]string, 0, len(m.Packages))
		for n := range m.Packages {
			names = append(names, n)
		}
		sort.Strings(names)
		if m.Extra != nil {
			fmt.Fprintf(stdout, "recipe:   %s", strings.Join(m.Extra.Packages, " "))
			if len(m.Extra.Imports) > 0 {
				fmt.Fprintf(stdout, " (imports %s)", strings.Join(m.Extra.Imports, " "))
			}
			fmt.Fprintln(stdout)
		}
		fmt.Fprintf(stdout, "packages: %d\n", len(names))
		for _, n := range names {
			fmt.Fprintf(stdout, "  %-40s %s\n", n, m.Packages[n])
		}
		dists := slices.Sorted(maps.Keys(m.Python))
		fmt.Fprintf(stdout, "python distributions: %d\n", len(dists))
		for _, n := range dists {
			fmt.Fprintf(stdout, "  %-40s %s\n", n, m.Python[n])
		}
		return exitOK
	default:
		fmt.Fprintf(stderr, "pyjail rootfs: unknown subcommand %q\n%s", sub, rootfsUsage)
		return exitUsage
	}
}

// readRecipe merges the --packages list and the --recipe file.
func readRecipe(list, file string) (rootfs.Recipe, error) {
	r, err := rootfs.ParsePackageList(list)
	if err != nil {
		return r, fmt.Errorf("--packages: %w", err)
	}
	if file == "" {
		return r, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return r, fmt.Errorf("opening recipe: %w", err)
	}
	defer f.Close()
	fr, err := rootfs.ParseRecipe(f, file)
	if err != nil {
		return r, err
	}
	return r.Merge(fr), nil
}
