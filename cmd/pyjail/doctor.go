package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pyjail/pyjail/jail"
	"github.com/pyjail/pyjail/jail/rootless"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/workspace/dirlock"
)

func cmdDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var common commonFlags
	asJSON := fs.Bool("json", false, "print the report as JSON")
	workspace := fs.String("workspace", defaultDataDir()+"/workspace", "workspace directory whose filesystem to check for idmapped mounts")
	dataDir := fs.String("data-dir", defaultDataDir(), "HTTP data directory whose filesystem to check for the locks replicas share")
	startJail := fs.Bool("start-jail", false, "also start one cold calc jail and run print(1+1) in it: catches what reading /proc and /sys cannot (a refused mount, a read-only cgroup)")
	common.register(fs)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	cfg, err := common.loadConfig()
	if err != nil {
		fmt.Fprintf(stderr, "pyjail doctor: %v\n", err)
		return exitUsage
	}
	rep := jail.Probe()
	rootfsLayer := policy.Layer{Name: "rootfs", Required: true}
	if layout, err := common.openRootfs(cfg); err != nil {
		rootfsLayer.Detail = err.Error()
		rootfsLayer.Fix = "apt-get install python3 python3-numpy python3-pandas python3-scipy python3-sympy, or run `pyjail rootfs build`"
	} else {
		rootfsLayer.Active = true
		rootfsLayer.Detail = fmt.Sprintf("%s rootfs at %s", layout.Kind, layout.Root)
	}
	rep.Layers = append(rep.Layers, rootfsLayer)
	switch {
	case os.Geteuid() != 0 || rootless.Active():
		rep.Layers = append(rep.Layers, rootless.Check()...)
	case rootless.InUserNS():
		// Root of a user namespace pyjail did not make (a
		// user-namespaced pod): only the cgroup is its to check.
		rep.Layers = append(rep.Layers, rootless.CheckCgroup())
	}
	if rootless.InUserNS() {
		rep.Layers = append(rep.Layers, usernsIDLayer(&cfg))
	} else {
		rep.Layers = append(rep.Layers, subIDLayer(cfg.IDMap))
	}
	// The server's own filter, loaded into doctor as serve loads it, so
	// that the workspace probe and --start-jail below run under it too.
	rep.Layers = append(rep.Layers, serverFilterLayer())
	if os.Geteuid() == 0 {
		rep.Layers = append(rep.Layers, jail.ProbeWorkspace(*workspace, cfg))
	}
	rep.Layers = append(rep.Layers, lockLayer(*dataDir))
	if *startJail {
		rep.Layers = append(rep.Layers, startJailLayer(ctx, &common))
	}
	missing := rep.Missing(cfg.AllowDegraded)

	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(struct {
			policy.HostReport
			Missing []policy.Layer `json:"missing"`
		}{rep, missing})
	} else {
		fmt.Fprintf(stdout, "pyjail %s on Linux %s, cgroup %s\n\n", version, rep.Kernel, rep.CgroupVersion)
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "LAYER\tSTATUS\tDETAIL\tFIX")
		for _, l := range rep.Layers {
			status := "ok"
			switch {
			case !l.Active && l.Required:
				status = "MISSING"
			case !l.Active:
				status = "off (optional)"
			}
			fix := ""
			if !l.Active {
				fix = l.Fix
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", l.Name, status, l.Detail, fix)
		}
		tw.Flush()
		if len(missing) > 0 {
			fmt.Fprintf(stdout, "\n%d required layer(s) missing: pyjail will refuse to run code.\n", len(missing))
		} else {
			fmt.Fprintln(stdout, "\nAll required layers are active.")
		}
	}
	if len(missing) > 0 {
		return 1
	}
	return 0
}

// serverFilterLayer loads policy.ServerDeny into this process, as every
// command that builds jails does (loadServerFilter), and reports it.
func serverFilterLayer() policy.Layer {
	l := policy.Layer{
		Name: "server_filter", Required: true,
		Fix: "run as root, or rootless with the user's id maps written (pyjail starts itself in a user namespace); " +
			"the kernel needs seccomp with TSYNC (Linux ≥ 3.17)",
	}
	if os.Geteuid() != 0 {
		l.Detail = "not root: the server loads its filter once it runs as root (rootless: in its own user namespace)"
		return l
	}
	sf, err := jail.LoadServerFilter()
	if err != nil {
		l.Detail = err.Error()
		return l
	}
	l.Active = true
	l.Detail = fmt.Sprintf("%d system calls denied (EPERM) to the server and everything it starts, jails before their own filter (policy.ServerDeny: ptrace, kexec, modules, clocks, io_uring, userfaultfd, ...); other ABIs killed", sf.Denied)
	if len(sf.Unknown) > 0 {
		l.Detail += fmt.Sprintf("; unknown to this libseccomp and skipped: %s", strings.Join(sf.Unknown, ", "))
	}
	return l
}

// subIDLayer warns when the jail's host uid range overlaps a range that
// /etc/subuid hands to a user: that user could then own the jail's files.
func subIDLayer(m policy.IDMap) policy.Layer {
	l := policy.Layer{
		Name: "uid_range", Required: false, Active: true,
		Detail: fmt.Sprintf("jail uids map to host %d-%d; code runs as host uid %d", m.HostID, m.HostID+m.Size-1, m.SandboxHostID()),
	}
	for _, f := range []string{"/etc/subuid", "/etc/subgid"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if owner, ok := policy.OverlappingSubID(string(b), m.HostID, m.Size); ok {
			l.Active = false
			l.Detail = fmt.Sprintf("%s gives %q ids that overlap the jail's range %d+%d", f, owner, m.HostID, m.Size)
			l.Fix = "set id_map.host_id in the config to a range no user owns"
		}
	}
	return l
}

// usernsIDLayer reports the ids jails get in the server's user namespace,
// fitted into cfg as jail.New fits them: there the jails' host ids are
// the subordinate range the namespace was given, by design.
func usernsIDLayer(cfg *policy.Config) policy.Layer {
	l := policy.Layer{Name: "uid_range", Required: true}
	if _, err := rootless.AdaptIDMap(cfg); err != nil {
		l.Detail, l.Fix = err.Error(), "give the server's user 65536 subordinate uids and gids (/etc/subuid, /etc/subgid)"
		return l
	}
	m := cfg.IDMap
	first, ok := rootless.HostID(m.HostID)
	if !ok {
		l.Detail = fmt.Sprintf("jail id %d is not mapped in this user namespace", m.HostID)
		return l
	}
	l.Active = true
	l.Detail = fmt.Sprintf("jail uids are this user namespace's %d-%d, host uids %d-%d; code runs as host uid %d",
		m.HostID, m.HostID+m.Size-1, first, first+m.Size-1, first+m.SandboxID)
	return l
}

// lockLayer reports whether the data directory's filesystem has the OFD
// locks that replicas sharing it need (optional: one replica needs none).
func lockLayer(dir string) policy.Layer {
	l := policy.Layer{Name: "data_dir_locks", Required: false}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		l.Detail = fmt.Sprintf("%s does not exist yet; not checked", dir)
		l.Fix = "rerun with --data-dir set to the directory replicas will share"
		return l
	}
	probe := filepath.Join(dir, ".pyjail-doctor-lock")
	lk, err := dirlock.Open(probe)
	if err == nil {
		defer os.Remove(probe)
		err = lk.Err()
	}
	if err != nil {
		l.Detail = err.Error()
		l.Fix = "run a single replica on this directory, or put it on a filesystem with working fcntl locks (NFSv4, a local disk)"
		return l
	}
	l.Active = true
	l.Detail = fmt.Sprintf("OFD locks work on %s: replicas may share it", dir)
	return l
}

// startJailLayer starts one cold calc jail and runs print(1+1) in it: the
// end-to-end check that the layers doctor reads about also work together
// (mounts allowed, cgroups writable, the rootfs reachable by the jail's
// uid). A jail that cannot start is a required layer missing.
func startJailLayer(ctx context.Context, common *commonFlags) policy.Layer {
	l := policy.Layer{
		Name: "start_jail", Required: true,
		Fix: "run `pyjail run -c 'print(1+1)' --log-level debug` to see where the jail start fails",
	}
	j, _, _, err := common.newJail(ctx, slog.New(slog.DiscardHandler))
	if err != nil {
		l.Detail = "building the jail: " + firstLine(err.Error())
		return l
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	start := time.Now()
	res, err := j.Run(ctx, record.Request{Profile: record.ProfileCalc, Code: "print(1+1)", Timeout: 30 * time.Second})
	switch {
	case err != nil:
		l.Detail = "starting a jail: " + firstLine(err.Error())
	case res.Verdict != record.VerdictOK || strings.TrimSpace(res.Stdout) != "2":
		l.Detail = fmt.Sprintf("a jail ran print(1+1) with verdict %s: %s", res.Verdict, firstLine(res.Message+" "+res.Stderr))
	default:
		l.Active = true
		l.Detail = fmt.Sprintf("a cold calc jail ran print(1+1) in %d ms", time.Since(start).Milliseconds())
	}
	return l
}

// firstLine is s up to its first newline.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
