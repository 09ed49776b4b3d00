package packages

import (
	"bufio"
	"crypto/rand"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/pyjail/pyjail/rootfs"
)

// Files of a tenant's package directory. The layer itself is a
// generation directory that the "site" symlink names; a swap points the
// symlink at a new generation with one rename, so a run always finds a
// whole layer.
const (
	siteLink   = "site"
	genPrefix  = "gen-"
	stagePref  = ".stage-"
	lockFile   = ".lock"
	maxRecord  = 8 << 20 // bytes of one RECORD file
	maxMetaDir = 4096    // entries of the layer's top directory
)

// Layer is one tenant's package directory: the layer its runs see and
// the staging directories of installs in progress. Its methods take no
// lock; Installer holds the tenant's lock around them.
type Layer struct {
	// Dir is the tenant's package directory, e.g.
	// <data-dir>/tenants/<name>/packages.
	Dir string
}

// Dist is one distribution in a layer.
type Dist struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Bytes is the size of the files its RECORD lists.
	Bytes int64 `json:"bytes"`
}

// Site returns the host directory of the current layer, resolved (the
// path a jail mounts read-only), or "" when the tenant has none.
func (l Layer) Site() (string, error) {
	if l.Dir == "" {
		return "", nil
	}
	target, err := os.Readlink(filepath.Join(l.Dir, siteLink))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the package layer: %w", err)
	}
	// The link is the host's own, but check it stays in Dir anyway.
	if filepath.Base(target) != target || !strings.HasPrefix(target, genPrefix) {
		return "", fmt.Errorf("the package layer link of %q names %q", l.Dir, target)
	}
	return filepath.Join(l.Dir, target), nil
}

// List returns the distributions of the current layer, sorted by name.
func (l Layer) List() ([]Dist, error) {
	site, err := l.Site()
	if err != nil || site == "" {
		return nil, err
	}
	return listDists(site)
}

// listDists reads every *.dist-info of site.
func listDists(site string) ([]Dist, error) {
	ents, err := os.ReadDir(site)
	if err != nil {
		return nil, fmt.Errorf("listing the package layer: %w", err)
	}
	if len(ents) > maxMetaDir {
		return nil, fmt.Errorf("the package layer has %d top-level entries, more than %d", len(ents), maxMetaDir)
	}
	var out []Dist
	for _, e := range ents {
		if !e.IsDir() || !strings.HasSuffix(e.Name(), ".dist-info") {
			continue
		}
		name, version, err := rootfs.ReadDistMetadata(filepath.Join(site, e.Name(), "METADATA"))
		if err != nil {
			return nil, err
		}
		if name == "" {
			continue
		}
		files, err := recordFiles(site, e.Name())
		if err != nil {
			return nil, err
		}
		d := Dist{Name: name, Version: version}
		for _, f := range files {
			if fi, err := os.Lstat(filepath.Join(site, f)); err == nil && fi.Mode().IsRegular() {
				d.Bytes += fi.Size()
			}
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return NormalizeName(out[i].Name) < NormalizeName(out[j].Name) })
	return out, nil
}

// recordFiles returns the paths a distribution's RECORD lists, relative
// to site and confined to it: an absolute path, a ".." that leaves site,
// or a path through the layer's own top (RECORD lists scripts as
// ../../../bin/x for --user installs) is skipped, never followed.
func recordFiles(site, distInfo string) ([]string, error) {
	f, err := openRegular(filepath.Join(site, distInfo, "RECORD"))
	if errors.Is(err, fs.ErrNotExist) {
		return []string{distInfo}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the RECORD of %s: %w", distInfo, err)
	}
	defer f.Close()
	r := csv.NewReader(bufio.NewReader(io.LimitReader(f, maxRecord)))
	r.FieldsPerRecord = -1
	var out []string
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the RECORD of %s: %w", distInfo, err)
		}
		if len(rec) == 0 || rec[0] == "" {
			continue
		}
		p := path.Clean(rec[0])
		if path.IsAbs(p) || p == "." || p == ".." || strings.HasPrefix(p, "../") {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// Usage is what a layer holds, as the quotas count it.
type Usage struct {
	Bytes int64
	Dists int
}

// usage measures the layer at site: regular files' sizes (every file,
// not only those RECORDs list) and distributions.
func usage(site string) (Usage, error) {
	var u Usage
	err := filepath.WalkDir(site, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != site && filepath.Dir(p) == site && strings.HasSuffix(d.Name(), ".dist-info") {
			u.Dists++
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			u.Bytes += fi.Size()
		}
		return nil
	})
	if err != nil {
		return u, fmt.Errorf("measuring the package layer: %w", err)
	}
	return u, nil
}

// harden makes a staged layer what runs may mount: owned by root, no
// write bit for group or others, no set-id or sticky bits, and nothing
// but directories and regular files (symlinks, devices, fifos and sockets
// a jail made are removed). Nothing is followed.
func harden(root string) error {
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		t := d.Type()
		if !t.IsDir() && !t.IsRegular() {
			return os.Remove(p)
		}
		if err := os.Lchown(p, 0, 0); err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		mode := fi.Mode().Perm()&^0o022 | 0o444
		if t.IsDir() {
			mode |= 0o111
		}
		return os.Chmod(p, mode)
	})
	if err != nil {
		return fmt.Errorf("hardening the package layer: %w", err)
	}
	return nil
}

// stage makes a staging directory in Dir.
func (l Layer) stage() (string, error) {
	if err := os.MkdirAll(l.Dir, 0o755); err != nil {
		return "", fmt.Errorf("creating the package directory: %w", err)
	}
	dir, err := os.MkdirTemp(l.Dir, stagePref)
	if err != nil {
		return "", fmt.Errorf("staging packages: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	return dir, nil
}

// swap makes staged (a hardened directory in a staging directory) the
// current layer, and removes the generation it replaces. A nil staged
// removes the layer.
func (l Layer) swap(staged string) error {
	old, err := l.Site()
	if err != nil {
		return err
	}
	link := filepath.Join(l.Dir, siteLink)
	if staged == "" {
		if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing the package layer: %w", err)
		}
	} else {
		var b [8]byte
		_, _ = rand.Read(b[:])
		gen := genPrefix + hex.EncodeToString(b[:])
		if err := os.Rename(staged, filepath.Join(l.Dir, gen)); err != nil {
			return fmt.Errorf("installing the package layer: %w", err)
		}
		tmp := filepath.Join(l.Dir, ".site-"+hex.EncodeToString(b[:]))
		if err := os.Symlink(gen, tmp); err != nil {
			return fmt.Errorf("installing the package layer: %w", err)
		}
		if err := os.Rename(tmp, link); err != nil {
			_ = os.Remove(tmp)
			return fmt.Errorf("installing the package layer: %w", err)
		}
	}
	// The generation just replaced stays until the next swap: a run that
	// started before this one has it mounted. Older ones go now.
	ents, err := os.ReadDir(l.Dir)
	if err != nil {
		return nil
	}
	cur, _ := l.Site()
	for _, e := range ents {
		p := filepath.Join(l.Dir, e.Name())
		if strings.HasPrefix(e.Name(), genPrefix) && p != cur && p != old {
			_ = os.RemoveAll(p)
		}
	}
	return nil
}

// copyTree copies the directories and regular files of src into dst (a
// new directory), never following a symlink.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch t := d.Type(); {
		case t.IsDir():
			return os.MkdirAll(to, 0o755)
		case t.IsRegular():
			in, err := openRegular(p)
			if err != nil {
				return err
			}
			defer in.Close()
			out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, in)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			return err
		default:
			return nil
		}
	})
}

// removeDists deletes from the layer at site the files of the named
// distributions (normalized names) that their RECORDs list, then the
// directories left empty, and returns the distributions it removed.
func removeDists(site string, keys map[string]bool) ([]Dist, error) {
	ents, err := os.ReadDir(site)
	if err != nil {
		return nil, fmt.Errorf("listing the package layer: %w", err)
	}
	var removed []Dist
	dirs := map[string]bool{}
	for _, e := range ents {
		if !e.IsDir() || !strings.HasSuffix(e.Name(), ".dist-info") {
			continue
		}
		name, version, err := rootfs.ReadDistMetadata(filepath.Join(site, e.Name(), "METADATA"))
		if err != nil {
			return nil, err
		}
		if !keys[NormalizeName(name)] {
			continue
		}
		files, err := recordFiles(site, e.Name())
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			p := filepath.Join(site, filepath.FromSlash(f))
			if fi, err := os.Lstat(p); err == nil && !fi.IsDir() {
				if err := os.Remove(p); err != nil {
					return nil, fmt.Errorf("removing %s: %w", name, err)
				}
			}
			for d := path.Dir(f); d != "." && d != "/"; d = path.Dir(d) {
				dirs[d] = true
			}
		}
		if err := os.RemoveAll(filepath.Join(site, e.Name())); err != nil {
			return nil, fmt.Errorf("removing %s: %w", name, err)
		}
		removed = append(removed, Dist{Name: name, Version: version})
	}
	// Deepest first; a directory that still holds something stays.
	var ds []string
	for d := range dirs {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return len(ds[i]) > len(ds[j]) })
	for _, d := range ds {
		p := filepath.Join(site, filepath.FromSlash(d))
		_ = os.Remove(filepath.Join(p, "__pycache__"))
		_ = os.Remove(p)
	}
	return removed, nil
}
