package rootfs

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// pythonSitePatterns are the directories, relative to a rootfs, where
// Debian's Python finds distributions: Debian's own dist-packages and
// the interpreter's standard library (which holds none today).
func pythonSitePatterns() []string {
	return []string{"usr/lib/python3/dist-packages", "usr/lib/python3.*", "usr/local/lib/python3*/dist-packages"}
}

// PythonDistributions lists the Python distributions installed in the
// tree at root, name to version, from the same metadata importlib.metadata
// reads: a *.dist-info directory's METADATA, an *.egg-info directory's
// PKG-INFO or an *.egg-info file. A distribution found twice keeps the
// first version, the one that comes first on sys.path.
func PythonDistributions(root string) (map[string]string, error) {
	out := map[string]string{}
	for _, pat := range pythonSitePatterns() {
		dirs, err := filepath.Glob(filepath.Join(root, pat))
		if err != nil {
			return nil, err
		}
		for _, dir := range dirs {
			ents, err := os.ReadDir(dir)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
					continue
				}
				return nil, fmt.Errorf("listing %q: %w", dir, err)
			}
			for _, e := range ents {
				var meta string
				switch name := e.Name(); {
				case strings.HasSuffix(name, ".dist-info") && e.IsDir():
					meta = filepath.Join(dir, name, "METADATA")
				case strings.HasSuffix(name, ".egg-info") && e.IsDir():
					meta = filepath.Join(dir, name, "PKG-INFO")
				case strings.HasSuffix(name, ".egg-info") && e.Type().IsRegular():
					meta = filepath.Join(dir, name)
				default:
					continue
				}
				n, v, err := ReadDistMetadata(meta)
				if err != nil {
					return nil, err
				}
				if _, seen := out[n]; n != "" && !seen {
					out[n] = v
				}
			}
		}
	}
	return out, nil
}

// ReadDistMetadata reads the Name and Version headers of a core-metadata
// file (RFC 822 style; the headers end at the first blank line). A
// missing file yields an empty name: pip leaves such directories behind.
// It opens p without following a symlink at its last component.
func ReadDistMetadata(p string) (name, version string, err error) {
	f, err := os.OpenFile(p, os.O_RDONLY|oNoFollow, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("reading %q: %w", p, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() && sc.Text() != "" {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.ToLower(k) {
		case "name":
			name = strings.TrimSpace(v)
		case "version":
			version = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return "", "", fmt.Errorf("reading %q: %w", p, err)
	}
	return name, version, nil
}
