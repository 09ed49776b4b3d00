package rootfs

import (
	"path"

	"github.com/pyjail/pyjail/record"
)

// Kind names where a rootfs comes from.
type Kind string

// Rootfs kinds.
const (
	// KindHost is a skeleton that borrows the host's /usr read-only.
	KindHost Kind = "host"
	// KindDebian is a self-contained tree built from Debian packages.
	KindDebian Kind = "debian"
)

// Bind is a read-only bind mount of a host path into the jail.
type Bind struct {
	// Source is the host path.
	Source string `json:"source"`
	// Dest is the absolute path inside the jail; the mountpoint exists in
	// the rootfs.
	Dest string `json:"dest"`
}

// Layout is a prepared rootfs: the host directory that becomes the jail's
// "/", plus the read-only binds that complete it. A Layout is immutable
// once returned and safe for concurrent use.
type Layout struct {
	Kind Kind `json:"kind"`
	// Root is the host directory that becomes "/" in the jail.
	Root string `json:"root"`
	// Binds are read-only bind mounts of host paths, in mount order.
	Binds []Bind `json:"binds,omitempty"`
	// Python is the interpreter's absolute path inside the jail.
	Python string `json:"python"`
}

// RunnerDir is the mountpoint of the embedded Python runner; with
// record.WorkspaceMount it is one of the directories every rootfs must
// have for the jail to mount over.
const RunnerDir = "/opt/pyjail"

// Mountpoints returns every directory the jail mounts something on, in
// creation order (parents first).
func Mountpoints() []string {
	return []string{"/proc", "/dev", "/tmp", "/usr", "/etc", "/opt", RunnerDir, path.Dir(record.WorkspaceMount), record.WorkspaceMount}
}

// PythonPath is where both rootfs kinds keep the interpreter.
const PythonPath = "/usr/bin/python3"

// hostPath joins a jail path onto the rootfs root.
func (l *Layout) hostPath(p string) string { return path.Join(l.Root, p) }
