package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Paths inside the image; deploy/kubernetes and deploy/compose name them.
const (
	BinaryPath = "/usr/local/bin/pyjail"
	RootfsPath = "/var/lib/pyjail/rootfs"
	DataPath   = "/var/lib/pyjail/data"
)

// layerFormat is part of every cached layer's key: a change to how layers
// are written must change it, or a cache would serve the old bytes.
const layerFormat = "pyjail-image-layer-1"

// The OCI annotation keys the image carries (image-spec annotations.md).
const (
	AnnotationSource   = "org.opencontainers.image.source"
	AnnotationRevision = "org.opencontainers.image.revision"
	AnnotationVersion  = "org.opencontainers.image.version"
	AnnotationCreated  = "org.opencontainers.image.created"
	AnnotationTitle    = "org.opencontainers.image.title"
	AnnotationRefName  = "org.opencontainers.image.ref.name"
)

// Config says what goes into the image. Build reads every path and writes
// only below CacheDir.
type Config struct {
	// BaseTar is the Debian base as a tar (mmdebstrap's tar output).
	BaseTar string
	// Binary is the pyjail binary, built with cgo and the seccomp tag.
	Binary string
	// Rootfs is a built Python rootfs directory; it must hold
	// .pyjail-manifest.json and .pyjail-tree (pyjail rootfs build).
	Rootfs string
	// Epoch is SOURCE_DATE_EPOCH: the image's created time and the
	// latest mtime any file in it may have.
	Epoch time.Time
	// Source, Revision and Version fill the OCI annotations.
	Source, Revision, Version string
	// CacheDir holds compressed layers by the hash of their inputs, so
	// that an unchanged base or rootfs is not compressed again.
	CacheDir string
	// Logger gets one line per layer; nil discards.
	Logger *slog.Logger
}

// Package is one installed Debian package of the image.
type Package struct {
	Name, Version, Where string
}

// Result is a built image with what was learnt while building it.
type Result struct {
	Image    v1.Image
	Digest   v1.Hash
	Packages []Package
}

// Build assembles the image. It is deterministic: the same inputs and
// epoch give the same digest, whatever the cache held.
func Build(ctx context.Context, cfg Config) (*Result, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Epoch.IsZero() {
		return nil, fmt.Errorf("building the image: %w", ErrNoEpoch)
	}
	epoch := cfg.Epoch.UTC().Truncate(time.Second)
	if err := os.MkdirAll(cfg.CacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the layer cache: %w", err)
	}
	manifest, err := os.ReadFile(filepath.Join(cfg.Rootfs, ".pyjail-manifest.json"))
	if err != nil {
		return nil, fmt.Errorf("reading the rootfs manifest: %w", err)
	}
	tree, err := os.ReadFile(filepath.Join(cfg.Rootfs, ".pyjail-tree"))
	if err != nil {
		return nil, fmt.Errorf("reading the rootfs tree listing: %w", err)
	}
	baseSum, err := fileSum(cfg.BaseTar)
	if err != nil {
		return nil, fmt.Errorf("hashing the base: %w", err)
	}
	binSum, err := fileSum(cfg.Binary)
	if err != nil {
		return nil, fmt.Errorf("hashing the binary: %w", err)
	}

	var status []byte
	layers := []struct {
		name, comment string
		key           []string
		fill          func(*tar.Writer) error
	}{
		{"base", "Debian base (mmdebstrap)", []string{baseSum}, func(tw *tar.Writer) error {
			s, err := copyBase(ctx, tw, cfg.BaseTar, epoch)
			status = s
			return err
		}},
		{"binary", "pyjail " + cfg.Version, []string{binSum}, func(tw *tar.Writer) error {
			return addBinary(tw, cfg.Binary, epoch)
		}},
		{"rootfs", "Python rootfs " + RootfsPath, []string{sha(manifest), sha(tree)}, func(tw *tar.Writer) error {
			return addRootfs(ctx, tw, cfg.Rootfs, epoch)
		}},
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, l := range layers {
		start := time.Now()
		key := sha([]byte(strings.Join(append([]string{layerFormat, l.name, epoch.Format(time.RFC3339)}, l.key...), "\n")))
		file := filepath.Join(cfg.CacheDir, l.name+"-"+key[:16]+".tar.gz")
		cached := true
		if _, err := os.Stat(file); err != nil {
			cached = false
			if err := writeLayer(file, l.fill); err != nil {
				return nil, fmt.Errorf("writing the %s layer: %w", l.name, err)
			}
		}
		layer, err := tarball.LayerFromFile(file, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, fmt.Errorf("loading the %s layer: %w", l.name, err)
		}
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:   plainLayer{layer},
			History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "make image", Comment: l.comment},
		})
		if err != nil {
			return nil, fmt.Errorf("appending the %s layer: %w", l.name, err)
		}
		size, _ := layer.Size()
		log.Info("layer", "name", l.name, "cached", cached, "bytes", size, "took", time.Since(start).Round(time.Millisecond))
	}
	if status == nil {
		// The base layer came from the cache: its package list still
		// comes from the base tar itself.
		if status, err = readBaseStatus(cfg.BaseTar); err != nil {
			return nil, err
		}
	}

	anns := map[string]string{
		AnnotationSource:   cfg.Source,
		AnnotationRevision: cfg.Revision,
		AnnotationVersion:  cfg.Version,
		AnnotationCreated:  epoch.Format(time.RFC3339),
		AnnotationTitle:    "pyjail",
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Created = v1.Time{Time: epoch}
	cf.Config = v1.Config{
		// Root of the container's user namespace: pyjail maps each jail's
		// uids, builds cgroups and mounts, which needs it. The engine's
		// user namespace (Kubernetes hostUsers: false, podman
		// --userns=auto) makes it an unprivileged uid on the host.
		User:         "0:0",
		Entrypoint:   []string{BinaryPath},
		Cmd:          []string{"serve"},
		Env:          []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		WorkingDir:   "/",
		ExposedPorts: map[string]struct{}{"8080/tcp": {}, "9090/tcp": {}},
		Labels:       anns,
		StopSignal:   "SIGTERM",
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("setting the image config: %w", err)
	}
	img = mutate.Annotations(img, anns).(v1.Image)
	digest, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("hashing the manifest: %w", err)
	}
	pkgs := parseStatus(status, "base")
	rootPkgs, err := rootfsPackages(manifest)
	if err != nil {
		return nil, err
	}
	return &Result{Image: img, Digest: digest, Packages: append(pkgs, rootPkgs...)}, nil
}

// plainLayer hides the tarball layer's own Descriptor, whose empty
// annotation map the manifest would keep in memory but not in its JSON
// (validate.Image sees the two differ); the descriptor is then computed
// from size, digest and media type alone, as the JSON has it.
type plainLayer struct{ v1.Layer }

// writeLayer writes fill's tar, gzipped, to file through a temporary
// name, so that a crash never leaves a half layer under a cache key.
func writeLayer(file string, fill func(*tar.Writer) error) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(file), ".layer-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	// No name or mtime in the gzip header (the zero Header): the bytes
	// depend on the tar alone.
	zw, err := gzip.NewWriterLevel(bw, gzip.DefaultCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	if err := fill(tw); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}

// normalise makes a header depend only on what the file is: numeric
// owners, no names, no atime/ctime or other PAX records, mtime clamped to
// the epoch and whole seconds.
func normalise(h *tar.Header, epoch time.Time) {
	h.Uname, h.Gname = "", ""
	h.AccessTime, h.ChangeTime = time.Time{}, time.Time{}
	h.PAXRecords = nil
	h.Xattrs = nil //nolint:staticcheck // cleared for determinism, not read
	h.Format = tar.FormatUnknown
	h.ModTime = h.ModTime.UTC().Truncate(time.Second)
	if h.ModTime.After(epoch) {
		h.ModTime = epoch
	}
}

// copyBase copies mmdebstrap's tar into the layer, normalised, without
// device nodes (every engine mounts its own /dev). It returns the base's
// dpkg status file, for the package list.
func copyBase(ctx context.Context, tw *tar.Writer, file string, epoch time.Time) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(bufio.NewReaderSize(f, 1<<20))
	var status []byte
	seen := map[string]bool{}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading %q: %w", file, err)
		}
		name := cleanName(h.Name)
		if name == "" || (strings.HasPrefix(name, "dev/") && name != "dev/") {
			continue
		}
		if h.Typeflag == tar.TypeChar || h.Typeflag == tar.TypeBlock {
			continue
		}
		if seen[name] {
			return nil, fmt.Errorf("reading %q: %q appears twice", file, name)
		}
		seen[name] = true
		h.Name = name
		if h.Typeflag == tar.TypeLink {
			h.Linkname = cleanName(h.Linkname)
		}
		normalise(h, epoch)
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		var w io.Writer = tw
		var buf bytes.Buffer
		if name == "var/lib/dpkg/status" {
			w = io.MultiWriter(tw, &buf)
		}
		if _, err := io.Copy(w, tr); err != nil {
			return nil, err
		}
		if buf.Len() > 0 {
			status = buf.Bytes()
		}
	}
	if status == nil {
		return nil, fmt.Errorf("reading %q: %w", file, ErrNoDpkgStatus)
	}
	return status, nil
}

// readBaseStatus reads only the dpkg status file out of the base tar.
func readBaseStatus(file string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(bufio.NewReaderSize(f, 1<<20))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("reading %q: %w", file, ErrNoDpkgStatus)
		}
		if err != nil {
			return nil, fmt.Errorf("reading %q: %w", file, err)
		}
		if cleanName(h.Name) == "var/lib/dpkg/status" {
			return io.ReadAll(tr)
		}
	}
}

// cleanName turns "./usr/bin/" into "usr/bin/" (directories keep their
// slash); the root itself becomes "".
func cleanName(n string) string {
	dir := strings.HasSuffix(n, "/")
	n = strings.TrimPrefix(path.Clean("/"+n), "/")
	if n != "" && dir {
		n += "/"
	}
	return n
}

// dirs writes directory entries for each path, root-owned and 0755.
func dirs(tw *tar.Writer, epoch time.Time, names ...string) error {
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: n + "/", Mode: 0o755, ModTime: epoch}); err != nil {
			return err
		}
	}
	return nil
}

func addBinary(tw *tar.Writer, file string, epoch time.Time) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if err := dirs(tw, epoch, "usr", "usr/local", "usr/local/bin"); err != nil {
		return err
	}
	h := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(BinaryPath, "/"), Mode: 0o755, Size: int64(len(b)), ModTime: epoch}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err = tw.Write(b)
	return err
}

// addRootfs copies the rootfs directory below RootfsPath in lexical order,
// owners and modes as on disk, hard links as links; it only reads dir.
// The mount points the manifests use (the data volume) come with it.
func addRootfs(ctx context.Context, tw *tar.Writer, dir string, epoch time.Time) error {
	prefix := strings.TrimPrefix(RootfsPath, "/")
	if err := dirs(tw, epoch, "var", "var/lib", "var/lib/pyjail", strings.TrimPrefix(DataPath, "/")); err != nil {
		return err
	}
	type inode struct{ dev, ino uint64 }
	links := map[inode]string{}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		var target string
		if fi.Mode()&fs.ModeSymlink != 0 {
			if target, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, target)
		if err != nil {
			return fmt.Errorf("reading %q: %w", p, err)
		}
		h.Name = path.Join(prefix, filepath.ToSlash(rel))
		if fi.IsDir() {
			h.Name += "/"
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			h.Uid, h.Gid = int(st.Uid), int(st.Gid)
			if fi.Mode().IsRegular() && st.Nlink > 1 {
				k := inode{uint64(st.Dev), st.Ino}
				if first, ok := links[k]; ok {
					h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
				} else {
					links[k] = h.Name
				}
			}
		}
		if fi.Mode()&(fs.ModeDevice|fs.ModeNamedPipe|fs.ModeSocket) != 0 {
			return fmt.Errorf("reading %q: %w", p, ErrSpecialFile)
		}
		normalise(h, epoch)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if n, err := io.Copy(tw, f); err != nil {
			return fmt.Errorf("copying %q: %w", p, err)
		} else if n != h.Size {
			return fmt.Errorf("copying %q: %w", p, ErrChanged)
		}
		return nil
	})
}

// parseStatus lists the installed packages of a dpkg status file.
func parseStatus(b []byte, where string) []Package {
	var out []Package
	for para := range strings.SplitSeq(string(b), "\n\n") {
		var p Package
		installed := false
		for line := range strings.SplitSeq(para, "\n") {
			k, v, ok := strings.Cut(line, ": ")
			if !ok {
				continue
			}
			switch k {
			case "Package":
				p.Name = v
			case "Version":
				p.Version = v
			case "Status":
				installed = strings.HasSuffix(v, " installed")
			}
		}
		if p.Name != "" && installed {
			p.Where = where
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b Package) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// rootfsPackages lists the packages the rootfs manifest records; the
// rootfs keeps no dpkg database (pyjail rootfs build prunes it).
func rootfsPackages(manifest []byte) ([]Package, error) {
	var m struct {
		Packages map[string]string `json:"packages"`
	}
	if err := json.Unmarshal(manifest, &m); err != nil {
		return nil, fmt.Errorf("decoding the rootfs manifest: %w", err)
	}
	var out []Package
	for n, v := range m.Packages {
		out = append(out, Package{Name: n, Version: v, Where: "rootfs"})
	}
	slices.SortFunc(out, func(a, b Package) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func fileSum(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
