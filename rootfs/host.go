package rootfs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pyjail/pyjail/policy"
)

// HostSpec says what a host rootfs is made from. The zero value is not
// useful: use DefaultHostSpec.
type HostSpec struct {
	// HostRoot is the host filesystem to borrow from, normally "/". Tests
	// point it at a fake tree.
	HostRoot string
	// EtcCopies lists host /etc entries copied into the rootfs when they
	// exist: files, symlinks, or directories copied whole.
	EtcCopies []string
	// SandboxUser names the user that code runs as, for /etc/passwd.
	SandboxUser string
	// SandboxID is the uid and gid of SandboxUser inside the jail.
	SandboxID uint32
}

// DefaultHostSpec returns the spec pyjail uses for its host rootfs.
func DefaultHostSpec(ids policy.IDMap) HostSpec {
	return HostSpec{
		HostRoot: "/",
		EtcCopies: []string{
			// numpy's libblas.so.3 is an alternatives symlink chain.
			"alternatives",
			// Lets the loader skip a directory walk for every library.
			"ld.so.cache",
			// Debian's Python reads its site configuration from here.
			"python3", "python3.11", "python3.12", "python3.13",
			// matplotlib's default rc file is a symlink to /etc.
			"matplotlibrc",
			// matplotlib and fontconfig find fonts through it.
			"fonts",
			"mime.types",
		},
		SandboxUser: "sandbox",
		SandboxID:   ids.SandboxID,
	}
}

// PrepareHost creates (or reuses) a host rootfs under parent and returns
// its Layout. The tree is content-addressed: its directory name is a hash
// of everything written into it, so concurrent servers share one tree and
// a changed host /etc yields a new one instead of mutating a tree that
// running jails use.
func PrepareHost(parent string, spec HostSpec) (*Layout, error) {
	files, err := hostFiles(spec)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(parent, "rootfs-host-"+files.digest()[:16])
	layout := &Layout{
		Kind:   KindHost,
		Root:   dir,
		Binds:  []Bind{{Source: filepath.Join(spec.HostRoot, "usr"), Dest: "/usr"}},
		Python: PythonPath,
	}
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return layout, Validate(layout)
	}
	if err := os.MkdirAll(parent, 0o711); err != nil {
		return nil, fmt.Errorf("creating rootfs parent %q: %w", parent, err)
	}
	tmp, err := os.MkdirTemp(parent, ".rootfs-host-tmp-")
	if err != nil {
		return nil, fmt.Errorf("creating temporary rootfs: %w", err)
	}
	// Named-return-free cleanup: the temporary tree goes away on every
	// failure, and after a successful rename there is nothing left to remove.
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("chmod %q: %w", tmp, err)
	}
	if err := writeSkeleton(tmp, files); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another process won the race with identical content.
		if _, statErr := os.Stat(filepath.Join(dir, ".complete")); statErr == nil {
			return layout, Validate(layout)
		}
		return nil, fmt.Errorf("installing rootfs %q: %w", dir, err)
	}
	return layout, Validate(layout)
}

// hostEntry is one thing PrepareHost writes under /etc.
type hostEntry struct {
	rel     string // path relative to the rootfs root
	mode    fs.FileMode
	content []byte // file content, or symlink target for symlinks
	isDir   bool
	isLink  bool
}

type hostFileSet []hostEntry

func (s hostFileSet) digest() string {
	h := sha256.New()
	for _, e := range s {
		fmt.Fprintf(h, "%s\x00%o\x00%t\x00%t\x00%d\x00", e.rel, e.mode, e.isDir, e.isLink, len(e.content))
		h.Write(e.content)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// hostFiles collects everything the skeleton's /etc will hold, in a
// deterministic order, reading the host once.
func hostFiles(spec HostSpec) (hostFileSet, error) {
	id := spec.SandboxID
	set := hostFileSet{
		{rel: "etc/passwd", mode: 0o644, content: fmt.Appendf(nil,
			"root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n%s:x:%d:%d:pyjail sandbox:/tmp:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
			spec.SandboxUser, id, id)},
		{rel: "etc/group", mode: 0o644, content: fmt.Appendf(nil,
			"root:x:0:\n%s:x:%d:\nnogroup:x:65534:\n", spec.SandboxUser, id)},
		{rel: "etc/hosts", mode: 0o644, content: []byte("127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost\n")},
		{rel: "etc/hostname", mode: 0o644, content: []byte("sandbox\n")},
		// A fixed zone keeps datetime results independent of the host.
		{rel: "etc/localtime", isLink: true, content: []byte("/usr/share/zoneinfo/UTC")},
		{rel: "etc/timezone", mode: 0o644, content: []byte("Etc/UTC\n")},
	}
	for _, name := range spec.EtcCopies {
		src := filepath.Join(spec.HostRoot, "etc", name)
		err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(spec.HostRoot, p)
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			switch {
			case d.Type()&fs.ModeSymlink != 0:
				target, err := os.Readlink(p)
				if err != nil {
					return err
				}
				set = append(set, hostEntry{rel: rel, isLink: true, content: []byte(target)})
			case d.IsDir():
				set = append(set, hostEntry{rel: rel, isDir: true, mode: 0o755})
			case d.Type().IsRegular():
				if info.Size() > 1<<20 {
					return fmt.Errorf("%q is larger than 1 MiB; refusing to copy it into the rootfs", p)
				}
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				set = append(set, hostEntry{rel: rel, mode: 0o644, content: b})
			default:
				// Sockets, fifos and devices have no business in /etc of a jail.
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("reading host %q: %w", src, err)
		}
	}
	sort.SliceStable(set, func(i, j int) bool { return set[i].rel < set[j].rel })
	return set, nil
}

// write creates the entry at host path p.
func (e hostEntry) write(p string) error {
	var err error
	switch {
	case e.isDir:
		err = os.MkdirAll(p, e.mode)
	case e.isLink:
		err = os.Symlink(string(e.content), p)
	default:
		err = os.WriteFile(p, e.content, e.mode)
	}
	if err != nil {
		return fmt.Errorf("writing %q: %w", e.rel, err)
	}
	return nil
}

// writeSkeleton fills dir with mountpoints, merged-/usr links and files.
func writeSkeleton(dir string, files hostFileSet) error {
	for _, mp := range Mountpoints() {
		if err := os.MkdirAll(filepath.Join(dir, mp), 0o755); err != nil {
			return fmt.Errorf("creating mountpoint %q: %w", mp, err)
		}
	}
	// Debian has a merged /usr: the top-level directories are symlinks.
	for _, l := range []struct{ name, target string }{
		{"bin", "usr/bin"}, {"lib", "usr/lib"}, {"lib64", "usr/lib64"}, {"sbin", "usr/sbin"},
	} {
		if err := os.Symlink(l.target, filepath.Join(dir, l.name)); err != nil {
			return fmt.Errorf("creating symlink %q: %w", l.name, err)
		}
	}
	for _, e := range files {
		p := filepath.Join(dir, e.rel)
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			return fmt.Errorf("entry %q escapes the rootfs", e.rel)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("creating %q: %w", filepath.Dir(p), err)
		}
		if err := e.write(p); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".complete"), nil, 0o444); err != nil {
		return fmt.Errorf("marking rootfs complete: %w", err)
	}
	return nil
}
