//go:build linux && cgo

package jail

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/pyjail/pyjail/jail/rootless"
	"github.com/pyjail/pyjail/policy"
)

// A workspace is made writable for the sandbox user in one of two ways.
//
// With an idmapped mount (the default where the filesystem supports it),
// the jail's view of the workspace maps the owner of the workspace
// directory onto the sandbox's host uid and gid: the sandbox writes files
// that belong on disk to that owner, and nothing on the host is chowned;
// the workspace keeps its owner and mode, 0700 included. Files of other
// owners show as nobody and are read-only to the sandbox.
//
// Where the filesystem cannot be idmapped (an old kernel, NFS, FUSE), the
// workspace is chowned to the sandbox's host uid instead, as before; doctor
// and sandbox://status say which applies and why.
type wsMode string

const (
	wsModeIdmap wsMode = "idmap"
	wsModeChown wsMode = "chown"
)

// idmapper makes workspace mounts. It keeps one user namespace per
// workspace owner for the mounts' idmapping, and remembers per filesystem
// whether idmapped mounts work there. It is safe for concurrent use.
type idmapper struct {
	// sandbox is the host uid and gid that sandboxed code runs as.
	sandbox uint32
	// disabled, when set, forces the chown fallback and says why
	// (configuration, a user namespace, tests).
	disabled error

	mu sync.Mutex
	// userns holds, per owner, the user namespace that maps the owner's
	// uid and gid (inside) onto the sandbox's (outside).
	userns map[owner]*os.File
	// support is, per filesystem (st_dev), nil where idmapped mounts
	// work, or why they do not.
	support map[uint64]error
}

// owner is a workspace directory's owner on disk.
type owner struct{ uid, gid uint32 }

func newIdmapper(sandbox uint32, disabled error) *idmapper {
	return &idmapper{sandbox: sandbox, disabled: disabled, userns: map[owner]*os.File{}, support: map[uint64]error{}}
}

// errIdmapDisabled is why a workspace is chowned when the operator turned
// idmapped mounts off.
var errIdmapDisabled = errors.New("idmapped workspace mounts are turned off in the configuration (workspace_idmap)")

// errIdmapUserns is why a workspace is chowned when the server runs in a
// user namespace (rootless, or a user-namespaced pod).
var errIdmapUserns = errors.New("the server runs in a user namespace, and an idmapped mount of a host filesystem needs CAP_SYS_ADMIN in the initial one")

// idmapDisabled says why the configuration or the server's namespace
// rules idmapped workspace mounts out, or nil.
func idmapDisabled(cfg policy.Config) error {
	switch {
	case cfg.WorkspaceIdmap == "off":
		return errIdmapDisabled
	case rootless.InUserNS():
		return errIdmapUserns
	}
	return nil
}

// workspacePlan is how one workspace directory is mounted into a jail.
type workspacePlan struct {
	mode  wsMode
	owner owner
	// why says why the chown fallback applies; nil for idmap.
	why error
}

// plan decides how dir is mounted: idmapped if its filesystem supports
// it (probed once per filesystem with a throwaway mount of dir), else
// chowned.
func (m *idmapper) plan(dir string) (workspacePlan, error) {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return workspacePlan{}, fmt.Errorf("opening workspace %q: %w", dir, err)
	}
	o := owner{st.Uid, st.Gid}
	if m.disabled != nil {
		return workspacePlan{mode: wsModeChown, owner: o, why: m.disabled}, nil
	}
	m.mu.Lock()
	why, probed := m.support[st.Dev]
	m.mu.Unlock()
	if !probed {
		f, err := m.detach(dir, o, true)
		if err == nil {
			f.Close()
		}
		why = err
		m.mu.Lock()
		m.support[st.Dev] = why
		m.mu.Unlock()
	}
	if why != nil {
		return workspacePlan{mode: wsModeChown, owner: o, why: why}, nil
	}
	return workspacePlan{mode: wsModeIdmap, owner: o}, nil
}

// detach makes a detached bind mount of dir (open_tree OPEN_TREE_CLONE:
// dir itself, never the mounts beneath it) with nosuid, nodev and noexec,
// and, with idmap, mapped so that the owner's files are the sandbox's. A
// jail attaches it in its own mount namespace (move_mount); the caller
// owns the returned file.
func (m *idmapper) detach(dir string, o owner, idmap bool) (*os.File, error) {
	tree, err := cloneMount(dir, "workspace")
	if err != nil {
		return nil, err
	}
	fd := int(tree.Fd())
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC}
	if idmap {
		ns, err := m.usernsFor(o)
		if err != nil {
			tree.Close()
			return nil, err
		}
		attr.Attr_set |= unix.MOUNT_ATTR_IDMAP
		attr.Userns_fd = uint64(ns.Fd())
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, attr); err != nil {
		tree.Close()
		if idmap && (errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EOPNOTSUPP)) {
			return nil, fmt.Errorf("the filesystem of %q cannot be idmapped on this kernel (mount_setattr MOUNT_ATTR_IDMAP: %w)", dir, err)
		}
		return nil, fmt.Errorf("setting the attributes of the workspace mount of %q: %w", dir, err)
	}
	return tree, nil
}

// usernsFor returns the user namespace whose mapping an idmapped mount of
// o's workspace uses: o's uid and gid inside, the sandbox's outside. One
// is made per owner and kept: making one costs a process.
func (m *idmapper) usernsFor(o owner) (*os.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f := m.userns[o]; f != nil {
		return f, nil
	}
	f, err := newUserns(o, m.sandbox)
	if err != nil {
		return nil, err
	}
	m.userns[o] = f
	return f, nil
}

// ProbeWorkspace reports how workspaces in dir (or the nearest directory
// above it that exists) would be made the sandbox's: by an idmapped mount,
// or by the chown fallback, and why. It makes a throwaway mount and, for
// it, a user namespace; doctor and serve call it once.
func ProbeWorkspace(dir string, cfg policy.Config) policy.Layer {
	l := policy.Layer{
		Name: "workspace_idmap", Required: false,
		Fix: "put workspaces (--workspace, --data-dir) on a filesystem that supports idmapped mounts (ext4, xfs, btrfs, tmpfs on Linux ≥ 6.3); " +
			"until then pyjail chowns each workspace to the sandbox's host uid",
	}
	for dir != "/" {
		if _, err := os.Stat(dir); err == nil {
			break
		}
		dir = filepath.Dir(dir)
	}
	m := newIdmapper(cfg.IDMap.SandboxHostID(), idmapDisabled(cfg))
	plan, err := m.plan(dir)
	switch {
	case err != nil:
		l.Detail = err.Error()
	case plan.mode == wsModeIdmap:
		l.Active = true
		l.Detail = fmt.Sprintf("workspaces under %s are mounted idmapped: the sandbox's files belong to the workspace's owner, nothing is chowned", dir)
	default:
		uid := fmt.Sprintf("host uid %d", cfg.IDMap.SandboxHostID())
		if rootless.InUserNS() {
			uid = fmt.Sprintf("uid %d", cfg.IDMap.SandboxHostID())
			if h, ok := rootless.HostID(cfg.IDMap.SandboxHostID()); ok {
				uid += fmt.Sprintf(" (host uid %d)", h)
			}
		}
		l.Detail = fmt.Sprintf("workspaces under %s are chowned to %s: %v", dir, uid, plan.why)
	}
	for _, f := range m.userns {
		f.Close()
	}
	return l
}

// cloneMount makes a detached mount of dir (open_tree OPEN_TREE_CLONE),
// for a forked jail to attach in its own mount namespace; what names what
// dir is in errors. The caller sets its attributes.
func cloneMount(dir, what string) (*os.File, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return nil, fmt.Errorf("cloning a mount of %s %q (open_tree): %w", what, dir, err)
	}
	return os.NewFile(uintptr(fd), what+" "+dir), nil
}
