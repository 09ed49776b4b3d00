//go:build linux

package rootless

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pyjail/pyjail/policy"
)

// stageEnv carries the stage of a rootless start from one execution of
// the binary to the next: "wait:PPID" in the child that waits for its id
// maps, "in:PPID" once it runs with them. It is removed before anything
// else runs, so no jail or worker ever sees it.
const stageEnv = "_PYJAIL_ROOTLESS"

// syncFD is the child's end of the pipe on which the parent says that the
// maps are written ("ok") or that writing them failed (EOF).
const syncFD = 3

// Ids is the number of subordinate uids and gids a rootless server needs:
// a jail's user namespace has 65536 ids, mapped from them.
const Ids = 65536

// SuggestedRange is the subordinate range doctor and the README propose:
// far above the ranges useradd hands to regular users (100000 on, 65536
// each) and apart from a root server's jail range (200000000 on).
const SuggestedRange = "300000000-300065535"

// leafName is the cgroup the server's processes move into, below the
// delegated cgroup, so that controllers can be enabled for the jails'
// sibling: cgroup v2 lets no cgroup with processes hand controllers to its
// children. systemd 254's DelegateSubgroup=supervisor makes the same one.
const leafName = "supervisor"

// jailsName is the cgroup below the delegated one that holds every jail's.
const jailsName = "jails"

// requiredControllers are the controllers every jail's cgroup needs.
var requiredControllers = []string{"cpu", "memory", "pids"}

// ErrCgroupV1 refuses rootless mode on a cgroup v1 (or hybrid) host.
var ErrCgroupV1 = errors.New("rootless mode needs the unified cgroup v2 hierarchy, and this host mounts cgroup v1 controllers: " +
	"on v1 every controller's hierarchy belongs to root and systemd cannot delegate it to an unprivileged user, " +
	"so jails would get no memory, pids or CPU limits; run pyjail as root on this host, " +
	"or boot with systemd.unified_cgroup_hierarchy=1 (the default from Debian 11 and Ubuntu 21.10 on)")

// entered is set in the execution that runs inside the user namespace
// this package made; hostUID and hostGID are the server's ids outside.
var (
	entered          bool
	hostUID, hostGID int
)

// Enter makes sure the program runs as root, if only in a user namespace.
// As host root, or already uid 0 in a user namespace (a pod's, or after
// Enter), it returns nil at once. As any other user it checks what
// rootless mode needs (Check's facts), starts this binary again in a new
// user and mount namespace whose ids are the user's own (as root) and a
// subordinate range from /etc/subuid and /etc/subgid (mapped by the setuid
// helpers newuidmap and newgidmap), relays signals to it, and exits with
// its status: on success Enter does not return in the calling process.
// The new execution returns nil from its own Enter.
//
// Call it first in main (after a jail init has taken over), before any
// goroutine is started that must survive: in the waiting child it blocks
// and re-executes.
func Enter() error {
	if v, ok := os.LookupEnv(stageEnv); ok {
		_ = os.Unsetenv(stageEnv)
		stage, ppid, _ := strings.Cut(v, ":")
		parent, _ := strconv.Atoi(ppid)
		switch stage {
		case "wait":
			waitAndReexec(parent)
		case "in":
			return begin(parent)
		case "sealed":
			return resume()
		}
		return fmt.Errorf("unknown rootless stage %q", v)
	}
	if os.Geteuid() == 0 {
		return nil
	}
	p, err := plan()
	if err != nil {
		return err
	}
	os.Exit(p.run())
	return nil
}

// Active reports whether this process runs in the user namespace Enter
// made (a rootless server).
func Active() bool { return entered }

// HostIDs returns the server's uid and gid on the host when Active.
func HostIDs() (uid, gid int) { return hostUID, hostGID }

// InUserNS reports whether this process runs in a user namespace other
// than the initial one: Enter's, a user-namespaced pod's, a container's.
func InUserNS() bool {
	uids, err := readIDMap("/proc/self/uid_map")
	return err == nil && !policy.InitialIDMap(uids)
}

// begin starts the execution inside the namespace: it dies with the
// parent that relays its signals, and drops the host's supplementary
// groups, which the namespace does not map and which would otherwise keep
// granting their access to files outside it.
func begin(parent int) error {
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("rootless: arming the parent-death signal: %w", err)
	}
	if os.Getppid() != parent {
		return errors.New("rootless: the parent process that relays signals exited during the start")
	}
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("rootless: dropping supplementary groups: %w", err)
	}
	// The setuid helpers were the only privilege to gain by exec, and
	// they have done their work: from here nothing the server starts
	// can gain any (jails set no_new_privs for themselves as well).
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("rootless: setting no_new_privs: %w", err)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("rootless: the new user namespace does not map its root (euid %d)", os.Geteuid())
	}
	return noteEntered()
}

// noteEntered notes that this execution runs rootless, with the host ids its
// namespace's root maps to, and leaves that in the environment for a
// later exec of this binary in the namespace (jail.SealSelf's
// re-execution from a sealed copy), which must know it runs rootless too.
func noteEntered() error {
	uids, err := readIDMap("/proc/self/uid_map")
	if err != nil {
		return err
	}
	gids, err := readIDMap("/proc/self/gid_map")
	if err != nil {
		return err
	}
	u, ok1 := policy.Outside(uids, 0)
	g, ok2 := policy.Outside(gids, 0)
	if !ok1 || !ok2 {
		return errors.New("rootless: the user namespace does not map its root")
	}
	entered, hostUID, hostGID = true, int(u), int(g)
	return os.Setenv(stageEnv, "sealed:0")
}

// resume is Enter in an execution that begin's already re-executed
// (jail.SealSelf): the namespace, its maps and no_new_privs are in place,
// and only what begin recorded is to be found again. The host ids come
// from the maps, not the environment, and a process that is not root of
// a user namespace other than the initial one is refused: the variable
// cannot make a host process believe it is rootless.
func resume() error {
	if os.Geteuid() != 0 || !InUserNS() {
		return fmt.Errorf("rootless: %s=sealed outside a user namespace pyjail made (euid %d)", stageEnv, os.Geteuid())
	}
	return noteEntered()
}

// waitAndReexec is the child's first execution: its credentials were
// computed at execve, before its id maps existed, so it holds no
// capability in its namespace. Once the parent has written the maps it
// executes the binary again, now as the namespace's root.
func waitAndReexec(parent int) {
	sync := os.NewFile(syncFD, "rootless sync")
	b, _ := io.ReadAll(io.LimitReader(sync, 16))
	sync.Close()
	if string(b) != "ok" {
		// The parent has reported why; there is nothing to add.
		os.Exit(1)
	}
	env := append(os.Environ(), fmt.Sprintf("%s=in:%d", stageEnv, parent))
	err := unix.Exec("/proc/self/exe", os.Args, env)
	fmt.Fprintf(os.Stderr, "pyjail: rootless: executing again in the user namespace: %v\n", err)
	os.Exit(1)
}

// setup is what a rootless start needs, found by plan.
type setup struct {
	user                 string
	uid, gid             uint32
	subuid, subgid       policy.SubIDRange
	newuidmap, newgidmap string
}

// plan checks the host and the user for rootless mode and says exactly
// what to fix when something is missing.
func plan() (*setup, error) {
	var errs []error
	for _, f := range Check() {
		if f.Required && !f.Active {
			errs = append(errs, fmt.Errorf("%s: %s; fix: %s", f.Name, f.Detail, f.Fix))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("pyjail runs as uid %d, not root, so it starts rootless, and it cannot:\n%w", os.Getuid(), errors.Join(errs...))
	}
	s := &setup{uid: uint32(os.Getuid()), gid: uint32(os.Getgid())}
	s.user = userName(s.uid)
	s.subuid, _, _ = subRange("/etc/subuid", s.user, s.uid)
	s.subgid, _, _ = subRange("/etc/subgid", s.user, s.uid)
	s.newuidmap, _ = exec.LookPath("newuidmap")
	s.newgidmap, _ = exec.LookPath("newgidmap")
	return s, nil
}

// run starts the binary again in a new user and mount namespace, maps its
// ids, relays signals and returns the status to exit with.
func (s *setup) run() int {
	// The child's parent-death signal fires when the thread that forked
	// it ends, not the process: keep this goroutine on its thread until
	// exit.
	runtime.LockOSThread()
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pyjail: rootless: %v\n", err)
		return 1
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = os.Args
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=wait:%d", stageEnv, os.Getpid()))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// A mount namespace of its own: the server's detached workspace
		// mounts need one its user namespace owns.
		Cloneflags: unix.CLONE_NEWUSER | unix.CLONE_NEWNS,
		Pdeathsig:  syscall.SIGKILL,
	}
	// Relay before the start, so that no signal falls between.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "pyjail: rootless: starting the server in a user namespace: %v\n", err)
		return 1
	}
	r.Close()
	if err := s.writeMaps(cmd.Process.Pid); err != nil {
		w.Close() // EOF: the child exits
		_ = cmd.Wait()
		fmt.Fprintf(os.Stderr, "pyjail: rootless: %v\n", err)
		return 1
	}
	_, _ = w.Write([]byte("ok"))
	w.Close()
	done := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-sigs:
				_ = cmd.Process.Signal(sig)
			case <-done:
				return
			}
		}
	}()
	err = cmd.Wait()
	close(done)
	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		if st.Signaled() {
			return 128 + int(st.Signal())
		}
		return st.ExitStatus()
	}
	fmt.Fprintf(os.Stderr, "pyjail: rootless: %v\n", err)
	return 1
}

// writeMaps maps the child's root to the user and ids 1..Ids to the start
// of the user's subordinate ranges, through the setuid helpers.
func (s *setup) writeMaps(pid int) error {
	for _, m := range []struct {
		helper string
		own    uint32
		sub    policy.SubIDRange
	}{{s.newuidmap, s.uid, s.subuid}, {s.newgidmap, s.gid, s.subgid}} {
		args := []string{strconv.Itoa(pid), "0", fmt.Sprint(m.own), "1", "1", fmt.Sprint(m.sub.Start), fmt.Sprint(min(m.sub.Count, Ids))}
		cmd := exec.Command(m.helper, args...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %s: %w: %s", m.helper, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// Check reports, as doctor layers, whether this host and user can run
// pyjail rootless: cgroup v2, a delegated cgroup with the controllers
// jails need, subordinate uid and gid ranges, and working id-map helpers.
// It reads files only; it works before and after Enter.
func Check() []policy.Layer {
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	if entered {
		uid, gid = uint32(hostUID), uint32(hostGID)
	}
	out := []policy.Layer{CheckCgroup()}
	out = append(out, checkSubIDs(uid, gid, userName(uid))...)
	return append(out, checkHelpers()...)
}

// CheckCgroup reports, as a doctor layer, whether this process has a
// delegated cgroup v2 with the controllers jails need: what rootless mode
// and any server in a user namespace (a user-namespaced pod) need.
func CheckCgroup() policy.Layer {
	uid := os.Getuid()
	if entered {
		uid = hostUID
	}
	who := fmt.Sprintf("%s (uid %d)", userName(uint32(uid)), uid)
	cg := policy.Layer{Name: "rootless_cgroup", Required: true}
	if dir, err := DelegatedCgroup(); err != nil {
		cg.Detail = err.Error()
		if errors.Is(err, ErrCgroupV1) {
			cg.Fix = "run pyjail as root, or boot the host on cgroup v2 (systemd.unified_cgroup_hierarchy=1)"
		} else {
			cg.Fix = "run pyjail from its systemd unit with Delegate=yes (dist/pyjail-rootless.service), " +
				"or for a try from a shell: systemd-run --user -p Delegate=yes --pty pyjail ..."
		}
	} else {
		cg.Active = true
		rel := path.Join("/", strings.TrimPrefix(dir, unifiedRoot))
		cg.Detail = fmt.Sprintf("cgroup %s is delegated to %s with %s; jails go below it (%s unless cgroup_parent lies inside)",
			rel, who, strings.Join(requiredControllers, ", "), path.Join(rel, jailsName))
	}
	return cg
}

func checkSubIDs(uid, gid uint32, name string) []policy.Layer {
	var out []policy.Layer
	for _, f := range []struct{ file, kind string }{{"/etc/subuid", "uid"}, {"/etc/subgid", "gid"}} {
		id := uid
		if f.kind == "gid" {
			id = gid
		}
		l := policy.Layer{
			Name: "rootless_sub" + f.kind, Required: true,
			Fix: fmt.Sprintf("give %s a range of %d: usermod --add-sub%ss %s %s (a range no other user has)", name, Ids, f.kind, SuggestedRange, name),
		}
		r, text, err := subRange(f.file, name, id)
		owner, overlap := policy.SubIDOverlap(text, name, id, policy.SubIDRange{Start: r.Start, Count: min(r.Count, Ids)})
		switch {
		case err != nil:
			l.Detail = err.Error()
		case overlap:
			l.Detail = fmt.Sprintf("%s gives %s %ss %d-%d, which overlap %s's: that user would own the jails' files and processes",
				f.file, name, f.kind, r.Start, r.Start+min(r.Count, Ids)-1, owner)
			l.Fix = fmt.Sprintf("give %s a range no other user has, such as %s", name, SuggestedRange)
		default:
			l.Active = true
			l.Detail = fmt.Sprintf("%s gives %s %ss %d-%d", f.file, name, f.kind, r.Start, r.Start+min(r.Count, Ids)-1)
		}
		out = append(out, l)
	}
	return out
}

// checkHelpers reports whether newuidmap and newgidmap can map this
// process's ids.
func checkHelpers() []policy.Layer {
	var out []policy.Layer
	for _, h := range []string{"newuidmap", "newgidmap"} {
		l := policy.Layer{
			Name: "rootless_" + h, Required: true,
			Fix: "apt-get install uidmap (the setuid helpers that write a range of ids into a user namespace's map)",
		}
		p, err := exec.LookPath(h)
		if err != nil {
			l.Detail = fmt.Sprintf("%s not found in PATH", h)
		} else if entered {
			// Its owner and mode show as the namespace sees them
			// (nobody); that it works is shown by this process.
			l.Active = true
			l.Detail = p + " (wrote this server's id maps)"
		} else if why := helperUsable(p); why != "" {
			l.Detail, l.Fix = why, "reinstall uidmap (apt-get install --reinstall uidmap), and set NoNewPrivileges=no in the unit"
		} else {
			l.Active = true
			l.Detail = p
		}
		out = append(out, l)
	}
	return out
}

// helperUsable says why the id-map helper at p cannot gain its privilege,
// or "" if it can: it must be setuid root or carry file capabilities, and
// the process must be free to gain privilege by exec.
func helperUsable(p string) string {
	if noNewPrivs() {
		return fmt.Sprintf("no_new_privs is set on this process (systemd NoNewPrivileges=yes?), so the setuid %s cannot gain its privilege", p)
	}
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return err.Error()
	}
	if st.Mode&unix.S_ISUID != 0 && st.Uid == 0 {
		return ""
	}
	if sz, err := unix.Getxattr(p, "security.capability", nil); err == nil && sz > 0 {
		return ""
	}
	return fmt.Sprintf("%s is neither setuid root nor has file capabilities", p)
}

// noNewPrivs reads this process's no_new_privs flag.
func noNewPrivs() bool {
	v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	return err == nil && v == 1
}

// userName returns the name of uid, or its number as text.
func userName(uid uint32) string {
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		return u.Username
	}
	return strconv.FormatUint(uint64(uid), 10)
}

// subRange returns the first range of at least Ids that file gives the
// user, with the file's text (for the overlap check), or an error that
// says what the file holds instead.
func subRange(file, name string, id uint32) (policy.SubIDRange, string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return policy.SubIDRange{}, "", fmt.Errorf("reading %s: %w", file, err)
	}
	ranges := policy.SubIDRanges(string(b), name, id)
	for _, r := range ranges {
		if r.Count >= Ids {
			return r, string(b), nil
		}
	}
	if len(ranges) == 0 {
		return policy.SubIDRange{}, string(b), fmt.Errorf("%s gives %s no range", file, name)
	}
	return policy.SubIDRange{}, string(b), fmt.Errorf("%s gives %s no range of %d ids (its largest has %d)", file, name, Ids, slices.MaxFunc(ranges, func(a, b policy.SubIDRange) int {
		return int(int64(a.Count) - int64(b.Count))
	}).Count)
}

func readIDMap(file string) ([]policy.IDExtent, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return policy.ParseIDMap(string(b))
}

const unifiedRoot = "/sys/fs/cgroup"

// ownCgroup returns this process's cgroup v2 path, or ErrCgroupV1.
func ownCgroup() (string, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(unifiedRoot, &st); err != nil {
		return "", fmt.Errorf("statfs %s: %w", unifiedRoot, err)
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		return "", ErrCgroupV1
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(b)) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("/proc/self/cgroup names no cgroup v2 path")
}

// DelegatedCgroup returns the directory of the cgroup delegated to this
// process: its own, or, once it has moved into the leaf "supervisor", that
// leaf's parent. It must be writable by the process and offer the
// controllers jails need.
func DelegatedCgroup() (string, error) {
	own, err := ownCgroup()
	if err != nil {
		return "", err
	}
	base := own
	if path.Base(own) == leafName {
		base = path.Dir(own)
	}
	dir := filepath.Join(unifiedRoot, base)
	for _, f := range []string{"cgroup.procs", "cgroup.subtree_control"} {
		if err := unix.Access(filepath.Join(dir, f), unix.W_OK); err != nil {
			return "", fmt.Errorf("cgroup %s is not delegated to this process (%s: %w)", base, f, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return "", err
	}
	have := strings.Fields(string(b))
	var missing []string
	for _, c := range requiredControllers {
		if !slices.Contains(have, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("cgroup %s is delegated without the %s controller(s) (it has: %s)", base, strings.Join(missing, ", "), strings.Join(have, " "))
	}
	return dir, nil
}

// Delegate prepares the delegated cgroup for jails and returns the cgroup
// path (relative to the hierarchy's root) to make their cgroups under:
// it moves every process of the delegated cgroup (the server, and the
// parent that relays its signals) into the leaf "supervisor", then enables
// the jails' controllers for the delegated cgroup's children. Doing it
// again finds the work done.
func Delegate() (string, error) {
	dir, err := DelegatedCgroup()
	if err != nil {
		return "", err
	}
	leaf := filepath.Join(dir, leafName)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("creating the server's leaf cgroup: %w", err)
	}
	// Processes can be forked into the cgroup while it is emptied: read
	// and move until it is empty, a few rounds at most.
	for round := 0; ; round++ {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			return "", err
		}
		pids := strings.Fields(string(b))
		if len(pids) == 0 {
			break
		}
		if round == 10 {
			return "", fmt.Errorf("cgroup %s keeps gaining processes (%s); cannot move them into %s", dir, strings.Join(pids, " "), leafName)
		}
		for _, pid := range pids {
			if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(pid), 0); err != nil && !errors.Is(err, unix.ESRCH) {
				return "", fmt.Errorf("moving process %s into %s: %w", pid, leaf, err)
			}
		}
		time.Sleep(time.Millisecond)
	}
	enable := "+" + strings.Join(requiredControllers, " +")
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(enable), 0); err != nil {
		return "", fmt.Errorf("enabling %s for the children of %s: %w", enable, dir, err)
	}
	return path.Join("/", strings.TrimPrefix(dir, unifiedRoot), jailsName), nil
}
