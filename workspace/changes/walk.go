package changes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"
)

// WalkFunc is called by Walk for every entry beneath the start directory.
// rel is the slash-separated path relative to the root of the os.Root (not
// to the start directory) and fi comes from lstat, so a symbolic link is
// reported as a link. Returning fs.SkipDir for a directory skips its
// contents; fs.SkipAll stops the walk without error; any other error
// stops the walk and is returned by Walk.
type WalkFunc func(rel string, fi fs.FileInfo) error

// readBatch bounds how many directory entries are held at once while a
// directory is read, so a directory with millions of entries costs memory
// only as fast as fn accepts them.
const readBatch = 256

// Walk visits every entry beneath dir ("" for the root itself) in root,
// depth first, in directory order (callers sort). It never follows a
// symbolic link: links, FIFOs, sockets and devices are reported to fn and
// never opened. At most one directory is open at a time, so deep trees
// cannot exhaust file descriptors; the list of pending subdirectories is
// bounded by whatever limit fn enforces. Walk checks ctx between entries.
func Walk(ctx context.Context, root *os.Root, dir string, fn WalkFunc) error {
	err := walkDir(ctx, root, dir, fn)
	if errors.Is(err, fs.SkipAll) {
		return nil
	}
	return err
}

func walkDir(ctx context.Context, root *os.Root, dir string, fn WalkFunc) error {
	name := dir
	if name == "" {
		name = "."
	}
	// O_DIRECTORY makes the open fail, without side effects, if a FIFO or
	// device was swapped in for the directory; O_NONBLOCK is belt and braces.
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("opening directory %q: %w", name, err)
	}
	// A directory swapped for a symlink after the caller's lstat would be
	// followed by Root.Open (confined to the root, but still not what we
	// listed); refuse anything that is not a directory once opened.
	if fi, err := f.Stat(); err != nil || !fi.IsDir() {
		f.Close()
		if err == nil {
			err = fmt.Errorf("not a directory")
		}
		return fmt.Errorf("opening directory %q: %w", name, err)
	}
	var subdirs []string
	for {
		if err := ctx.Err(); err != nil {
			f.Close()
			return fmt.Errorf("walking %q: %w", name, err)
		}
		ents, rerr := f.ReadDir(readBatch)
		for _, e := range ents {
			rel := e.Name()
			if dir != "" {
				rel = path.Join(dir, e.Name())
			}
			// Root.Lstat resolves rel beneath the root and does not
			// follow a final symlink.
			fi, err := root.Lstat(rel)
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since ReadDir; nothing to report
			}
			if err != nil {
				f.Close()
				return fmt.Errorf("inspecting %q: %w", rel, err)
			}
			err = fn(rel, fi)
			if errors.Is(err, fs.SkipDir) && fi.IsDir() {
				continue
			}
			if err != nil {
				f.Close()
				return err
			}
			if fi.IsDir() {
				subdirs = append(subdirs, rel)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			f.Close()
			return fmt.Errorf("reading directory %q: %w", name, rerr)
		}
	}
	// Close before descending so descriptor use does not grow with depth.
	f.Close()
	for _, d := range subdirs {
		if err := walkDir(ctx, root, d, fn); err != nil {
			return err
		}
	}
	return nil
}
