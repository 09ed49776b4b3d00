package rootfs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// toolWaitDelay is how long a cancelled bootstrap tool gets, after
// SIGTERM, to unmount what it mounted in the tree before it is killed.
const toolWaitDelay = 30 * time.Second

// Build builds the Python rootfs described by opt into opt.Dir and returns
// its manifest. If opt.Dir already holds a tree built from the same recipe
// (see Manifest.RecipeKey) that passes VerifyMetadata, Build returns its
// manifest without building, unless opt.Force is set. Package updates in
// the mirror do not change the recipe: rebuild with Force to pick them up.
//
// Build runs the steps listed in the package documentation, in order, in
// a temporary sibling of opt.Dir that it removes on failure; the finished
// tree replaces opt.Dir with an atomic exchange. A jail that has the old
// tree mounted keeps running on it until the tree is removed a moment
// later, so rebuild while no server runs.
//
// Build needs root: only root can create the root-owned tree the jail's
// user namespace cannot write to.
func Build(ctx context.Context, opt BuildOptions) (m *Manifest, err error) {
	start := time.Now()
	r, err := opt.resolve()
	if err != nil {
		return nil, fmt.Errorf("building rootfs: %w", err)
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("building rootfs %q: %w", r.dir, err)
		}
	}()
	if os.Geteuid() != 0 {
		return nil, ErrNeedRoot
	}
	tool, err := findTool(opt.Tool)
	if err != nil {
		return nil, err
	}
	parent := filepath.Dir(r.dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	unlock, err := lockBuild(r.dir)
	if err != nil {
		return nil, err
	}
	defer unlock()

	// 1. Skip the build when the tree is already what this recipe makes.
	key := r.key()
	if !opt.Force {
		if old, err := ReadManifest(r.dir); err == nil && old.RecipeKey == key {
			if _, err := VerifyWith(r.dir, VerifyMetadata); err == nil {
				r.log.Info("rootfs up to date", logKeyDir, r.dir)
				return old, nil
			} else {
				r.log.Warn("rebuilding rootfs", logKeyDir, r.dir, logKeyReason, err.Error())
			}
		}
	}

	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(r.dir)+".build-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if tmp != "" {
			removeTree(r, tmp)
		}
	}()
	// MkdirTemp makes it 0700; apt's download sandbox user needs to enter it.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, err
	}

	// 2. Bootstrap Debian with the packages.
	r.step("bootstrapping with "+filepath.Base(tool), logKeySuite, r.suite, logKeyTool, tool)
	if err := bootstrap(ctx, r, tool, tmp); err != nil {
		return nil, err
	}
	toolVersion := toolVersion(ctx, tool)

	// 3. Read the package database before anything removes it.
	status, err := os.ReadFile(filepath.Join(tmp, "var/lib/dpkg/status"))
	if err != nil {
		return nil, fmt.Errorf("reading package status: %w", err)
	}
	pkgs, err := parseDpkgStatus(bytes.NewReader(status))
	if err != nil {
		return nil, fmt.Errorf("parsing package status: %w", err)
	}
	for _, p := range r.packages {
		if pkgs[p] == nil {
			return nil, fmt.Errorf("package %q was not installed", p)
		}
	}
	keep := keepSet(pkgs, r.packages, r.drop)

	// 4. Drop the packages only development or a display needs.
	removed, err := dropPackages(tmp, pkgs, keep)
	if err != nil {
		return nil, err
	}
	r.step("dropped packages", logKeyCount, len(pkgs)-len(keep))
	if _, err := removeDanglingAlternatives(tmp); err != nil {
		return nil, err
	}
	// The loader cache still names the dropped libraries.
	if err := runChroot(ctx, r, tmp, nil, "/sbin/ldconfig"); err != nil {
		return nil, err
	}

	// 5. Prune documentation, package-manager state and test suites.
	n, err := prune(tmp, pruneRules())
	if err != nil {
		return nil, err
	}
	tests, err := removeTestDirs(tmp)
	if err != nil {
		return nil, err
	}
	r.step("pruned", logKeyCount, n+tests+len(removed))
	pythonDists, err := PythonDistributions(tmp)
	if err != nil {
		return nil, err
	}

	// 6. Write /etc for the sandbox user and create the mountpoints.
	if err := writeEtc(tmp, r); err != nil {
		return nil, err
	}
	for _, mp := range Mountpoints() {
		if err := os.MkdirAll(filepath.Join(tmp, mp), 0o755); err != nil {
			return nil, fmt.Errorf("creating mountpoint %q: %w", mp, err)
		}
	}

	// 7. Import the modules as the sandbox user: this catches anything a
	// drop or prune took that the libraries need, and unreadable files.
	r.step("checking imports")
	if err := checkImports(ctx, r, tmp); err != nil {
		return nil, err
	}
	if _, err := prune(tmp, volatileRules()); err != nil {
		return nil, err
	}

	// 8. Harden: no setuid/setgid bits, no file capabilities, no device
	// nodes, nothing writable by anyone but root.
	if err := harden(tmp); err != nil {
		return nil, err
	}

	// 9. Validate the result as the jail will use it.
	if err := checkBuilt(tmp, r); err != nil {
		return nil, err
	}

	// 10. Hash the tree and write the manifest.
	r.step("hashing the tree")
	m = &Manifest{
		Extra:  extraOrNil(r.extra),
		Recipe: RecipeVersion, RecipeKey: key, Suite: r.suite, Arch: r.arch, Sources: r.sources,
		Tool: toolVersion, Requested: r.packages, Packages: map[string]string{},
		Python: pythonDists, Imports: r.imports,
		BuiltAt: start.UTC().Truncate(time.Second),
	}
	for n := range keep {
		m.Packages[n] = pkgs[n].Version
	}
	for n := range pkgs {
		if !keep[n] {
			m.Dropped = append(m.Dropped, n)
		}
	}
	sort.Strings(m.Dropped)
	m.BuildSeconds = time.Since(start).Round(time.Second).Seconds()
	if err := writeManifest(tmp, m); err != nil {
		return nil, err
	}

	// 11. Install: swap the new tree in, then remove the old one.
	r.step("installing")
	if err := install(r, tmp); err != nil {
		return nil, err
	}
	tmp = ""
	r.log.Info("rootfs built", logKeyDir, r.dir, logKeyCount, len(m.Packages), logKeyDuration, time.Since(start).Round(time.Millisecond))
	return m, nil
}

// findTool returns the path of the named tool, or by default of
// mmdebstrap, or else debootstrap.
func findTool(name string) (string, error) {
	candidates := []string{"mmdebstrap", "debootstrap"}
	if name != "" {
		if b := filepath.Base(name); b != "mmdebstrap" && b != "debootstrap" {
			return "", fmt.Errorf("unknown bootstrap tool %q: want mmdebstrap or debootstrap", name)
		}
		candidates = []string{name}
	}
	for _, t := range candidates {
		if p, err := exec.LookPath(t); err == nil {
			return p, nil
		}
	}
	if name != "" {
		return "", fmt.Errorf("%w: %q is not installed (apt-get install %s)", ErrToolMissing, name, filepath.Base(name))
	}
	return "", ErrToolMissing
}

func toolVersion(ctx context.Context, tool string) string {
	out, err := exec.CommandContext(ctx, tool, "--version").Output()
	if err != nil {
		return filepath.Base(tool)
	}
	return strings.TrimSpace(string(out))
}

// dpkgExcludes keeps documentation and translations out of the tree as
// dpkg unpacks it; prune removes what slips through.
func dpkgExcludes() []string {
	return []string{
		"path-exclude=/usr/share/man/*",
		"path-exclude=/usr/share/info/*",
		"path-exclude=/usr/share/lintian/*",
		"path-exclude=/usr/share/doc/*",
		"path-include=/usr/share/doc/*/copyright",
		"path-exclude=/usr/share/locale/*",
		"path-include=/usr/share/locale/locale.alias",
	}
}

// bootstrap runs the tool to install the packages into dir.
func bootstrap(ctx context.Context, r *recipe, tool, dir string) error {
	var args []string
	switch filepath.Base(tool) {
	case "mmdebstrap":
		args = []string{
			"--mode=root",
			// Essential:yes plus the packages: no apt or init in the result
			// (apt is installed to resolve the packages, then dropped).
			"--variant=essential",
			"--include=" + strings.Join(r.packages, ","),
			`--aptopt=Acquire::Languages "none"`,
		}
		for _, o := range dpkgExcludes() {
			args = append(args, "--dpkgopt="+o)
		}
		if r.progress == nil {
			args = append(args, "--quiet")
		}
		args = append(args, "--", r.suite, dir)
		args = append(args, r.sources...)
	case "debootstrap":
		// debootstrap takes a single mirror URI: the first source's. The
		// -updates and -security pockets are not used.
		uri := ""
		if f := strings.Fields(stripOptions(r.sources[0])); len(f) >= 2 {
			uri = f[1]
		}
		args = []string{"--variant=minbase", "--include=" + strings.Join(r.packages, ","), r.suite, dir, uri}
	default:
		return fmt.Errorf("unknown bootstrap tool %q", tool)
	}
	out, err := runTail(ctx, r, tool, args...)
	if err != nil && ctx.Err() == nil {
		if missing := missingPackages(out); len(missing) > 0 {
			return fmt.Errorf("%w: %s has no package %s (apt-cache policy NAME on a %s host shows what exists)",
				ErrNoPackage, r.suite, quoteList(missing), r.suite)
		}
	}
	return err
}

// stripOptions removes "[...]" from a one-line apt source.
func stripOptions(line string) string {
	if i := strings.Index(line, "["); i >= 0 {
		if j := strings.Index(line[i:], "]"); j >= 0 {
			return line[:i] + line[i+j+1:]
		}
	}
	return line
}

// run runs a command with the build's output handling: its output goes
// to Progress, if set, and its tail ends up in the error. Both streams go
// through one writer, a pipe, so exec serializes the writes (and
// mmdebstrap prints lines rather than progress bars).
func run(ctx context.Context, r *recipe, name string, args ...string) error {
	_, err := runTail(ctx, r, name, args...)
	return err
}

// runTail is run that also returns the tail of the output, for callers
// that look for a known failure in it.
func runTail(ctx context.Context, r *recipe, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	// SIGTERM first: mmdebstrap unmounts /proc, /sys and /dev from the
	// tree on a signal, and a killed one leaves them mounted.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = toolWaitDelay
	tail := &tailBuffer{max: 8 << 10}
	var w io.Writer = tail
	if r.progress != nil {
		w = io.MultiWriter(r.progress, tail)
	}
	cmd.Stdout, cmd.Stderr = w, w
	start := time.Now()
	err := cmd.Run()
	r.log.Debug("ran", logKeyTool, name, logKeyDuration, time.Since(start).Round(time.Millisecond))
	out := tail.String()
	if err != nil {
		if ctx.Err() != nil {
			return out, fmt.Errorf("running %s: %w", filepath.Base(name), ctx.Err())
		}
		if s := strings.TrimSpace(out); s != "" {
			return out, fmt.Errorf("running %s: %w; its output ended with:\n%s", filepath.Base(name), err, s)
		}
		return out, fmt.Errorf("running %s: %w", filepath.Base(name), err)
	}
	return out, nil
}

// runChroot runs argv inside the tree at root, as root, with a minimal
// environment plus env.
func runChroot(ctx context.Context, r *recipe, root string, env []string, argv ...string) error {
	return runChrootAs(ctx, r, root, "", env, argv...)
}

func runChrootAs(ctx context.Context, r *recipe, root, userspec string, env []string, argv ...string) error {
	args := []string{}
	if userspec != "" {
		args = append(args, "--userspec="+userspec)
	}
	args = append(append(args, root), argv...)
	cmd := exec.CommandContext(ctx, "chroot", args...)
	cmd.Env = append([]string{"PATH=/usr/bin:/usr/sbin:/bin:/sbin", "LANG=C.UTF-8"}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("running %q in the tree: %w\n%s", strings.Join(argv, " "), err, lastBytes(out, 4<<10))
	}
	r.log.Debug("ran in tree", logKeyTool, argv[0])
	return nil
}

// checkImports imports r.imports with the jail's interpreter flags as the
// sandbox user, and renders a matplotlib figure. /tmp is still writable
// here; matplotlib keeps its cache there, and prune empties it after.
func checkImports(ctx context.Context, r *recipe, root string) error {
	const code = `import importlib, sys
for m in sys.argv[1:]:
    importlib.import_module(m)
if "matplotlib.pyplot" in sys.argv[1:]:
    import io, matplotlib.pyplot as plt
    fig = plt.figure(); plt.plot([1, 2], [3, 4]); plt.title("pyjail")
    fig.savefig(io.BytesIO(), format="png")
`
	id := strconv.FormatUint(uint64(r.ids.SandboxID), 10)
	argv := append([]string{PythonPath, "-I", "-B", "-c", code}, r.imports...)
	return runChrootAs(ctx, r, root, id+":"+id,
		[]string{"HOME=/tmp", "TMPDIR=/tmp", "MPLBACKEND=Agg", "MPLCONFIGDIR=/tmp/.matplotlib", "OPENBLAS_NUM_THREADS=1"},
		argv...)
}

// writeEtc writes the same generated /etc files as the host rootfs:
// passwd and group naming the sandbox user, hosts, hostname, a UTC
// localtime. They replace Debian's, which list daemons' users.
func writeEtc(root string, r *recipe) error {
	spec := DefaultHostSpec(r.ids)
	spec.EtcCopies = nil // the tree has its own /etc
	files, err := hostFiles(spec)
	if err != nil {
		return err
	}
	for _, e := range files {
		p := filepath.Join(root, e.rel)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("replacing %q: %w", e.rel, err)
		}
		if err := e.write(p); err != nil {
			return err
		}
	}
	return nil
}

// harden walks the tree: device nodes, fifos and sockets go; setuid and
// setgid bits, group and world write bits and file capabilities are
// cleared; everything becomes world-readable; the root becomes root-owned
// 0755.
func harden(root string) error {
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		t := d.Type()
		switch {
		case t&fs.ModeSymlink != 0:
			return nil
		case t&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe|fs.ModeSocket) != 0:
			return os.Remove(p)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		m := fi.Mode()
		want := m&(fs.ModePerm|fs.ModeSticky)&^0o022 | m&fs.ModeDir
		// Everything readable (directories searchable) by all: the tree
		// holds no secrets once shadow files are pruned, and a server
		// that does not run as root must still be able to verify it.
		if want |= 0o444; t.IsDir() {
			want |= 0o111
		}
		if want != m {
			if err := os.Chmod(p, want); err != nil {
				return err
			}
		}
		if t.IsRegular() {
			// A file capability would raise privileges on exec, like setuid.
			if err := unix.Removexattr(p, "security.capability"); err != nil && !errors.Is(err, unix.ENODATA) && !errors.Is(err, unix.ENOTSUP) {
				return fmt.Errorf("removing capabilities of %q: %w", p, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("hardening: %w", err)
	}
	if err := os.Chown(root, 0, 0); err != nil {
		return err
	}
	return os.Chmod(root, 0o755)
}

// checkBuilt runs Validate and the ownership scans on the unfinished tree.
func checkBuilt(root string, r *recipe) error {
	var errs []error
	l := &Layout{Kind: KindDebian, Root: root, Python: PythonPath}
	// The manifest does not exist yet; every other check applies.
	for _, c := range Checks() {
		if c.Name == checkNameManifest {
			continue
		}
		if err := c.Fn(l); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s: %w", ErrInvalid, c.Name, err))
		}
	}
	setid, err := FindSetID(root)
	if err != nil {
		return err
	}
	if len(setid) > 0 {
		errs = append(errs, fmt.Errorf("%w: setuid/setgid entries remain: %s", ErrInvalid, strings.Join(setid, ", ")))
	}
	for _, id := range []uint32{r.ids.HostID, r.ids.SandboxHostID()} {
		w, err := FindWritable(root, id, id)
		if err != nil {
			return err
		}
		if len(w) > 0 {
			errs = append(errs, fmt.Errorf("%w: writable by host uid %d: %s", ErrInvalid, id, strings.Join(w[:min(len(w), maxReported)], ", ")))
		}
	}
	return errors.Join(errs...)
}

// lockBuild takes an exclusive lock next to dir so two builds never race
// on the same tree; the returned func releases it.
func lockBuild(dir string) (func(), error) {
	p := filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".lock")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another build holds %q: %w", p, err)
	}
	return func() { f.Close() }, nil
}

// install puts the finished tree tmp at r.dir. With an existing tree, the
// two are exchanged atomically, so r.dir always holds a complete tree;
// the old one is then removed.
func install(r *recipe, tmp string) error {
	if _, err := os.Lstat(r.dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.Rename(tmp, r.dir); err != nil {
			return fmt.Errorf("installing: %w", err)
		}
		return nil
	}
	if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, r.dir, unix.RENAME_EXCHANGE); err != nil {
		// Filesystems without RENAME_EXCHANGE: move the old tree aside
		// first, leaving a moment without a tree.
		old := tmp + ".old"
		if err := os.Rename(r.dir, old); err != nil {
			return fmt.Errorf("moving the old tree aside: %w", err)
		}
		if err := os.Rename(tmp, r.dir); err != nil {
			_ = os.Rename(old, r.dir)
			return fmt.Errorf("installing: %w", err)
		}
		removeTree(r, old)
		return nil
	}
	// tmp now holds the old tree.
	removeTree(r, tmp)
	return nil
}

// removeTree deletes a build or old tree, unless something is mounted
// below it: a bootstrap tool killed mid-build can leave /proc or /dev
// mounted there, and removing through those mounts would reach the host.
func removeTree(r *recipe, dir string) {
	if mounts := mountsUnder(dir); len(mounts) > 0 {
		r.log.Error("not removing a tree with mounts below it; unmount them and remove it by hand",
			logKeyDir, dir, logKeyReason, strings.Join(mounts, " "))
		return
	}
	if err := os.RemoveAll(dir); err != nil {
		r.log.Warn("removing tree", logKeyDir, dir, logKeyReason, err.Error())
	}
}

// mountsUnder lists the mount points at or below dir in this process's
// mount namespace.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		// Unknown: claim a mount so nothing is removed blindly.
		return []string{"(cannot read /proc/self/mountinfo)"}
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out
}

// unescapeMountinfo decodes the \ooo octal escapes of mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.buf) }

func lastBytes(b []byte, n int) string {
	if len(b) > n {
		return "…" + string(b[len(b)-n:])
	}
	return string(b)
}
