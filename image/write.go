package image

import (
	"archive/tar"
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// WriteLayout writes img as an OCI image layout in dir, which must not
// exist yet, its index entry named ref (org.opencontainers.image.ref.name).
func WriteLayout(dir string, img v1.Image, ref string) error {
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("writing the layout %q: %w", dir, fs.ErrExist)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("writing the layout %q: %w", dir, err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{AnnotationRefName: ref})); err != nil {
		return fmt.Errorf("writing the image into %q: %w", dir, err)
	}
	return nil
}

// WriteArchive writes the layout in dir as an oci-archive (a tar of the
// layout, as podman load and skopeo's oci-archive: transport read) to
// file, in lexical order, root-owned, every mtime the epoch.
func WriteArchive(file, dir string, epoch time.Time) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(file), ".archive-*")
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
	tw := tar.NewWriter(bw)
	epoch = epoch.UTC().Truncate(time.Second)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: epoch, Mode: 0o644, Typeflag: tar.TypeReg}
		if d.IsDir() {
			h.Typeflag, h.Mode, h.Name = tar.TypeDir, 0o755, h.Name+"/"
			return tw.WriteHeader(h)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("archiving %q: %w", p, ErrSpecialFile)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		h.Size = fi.Size()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return fmt.Errorf("archiving %q: %w", dir, err)
	}
	if err := tw.Close(); err != nil {
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
