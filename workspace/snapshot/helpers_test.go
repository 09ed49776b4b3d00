package snapshot

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// env is a workspace, its snapshot store, and a sibling "outside"
// directory where nothing may ever be written.
type env struct {
	parent, ws, snaps, outside string
	s                          *Store
}

func newEnv(t *testing.T, lim Limits) *env {
	t.Helper()
	parent := t.TempDir()
	e := &env{
		parent:  parent,
		ws:      filepath.Join(parent, "ws"),
		snaps:   filepath.Join(parent, "snaps"),
		outside: filepath.Join(parent, "outside"),
	}
	for _, d := range []string{e.ws, e.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, filepath.Join(e.outside, "secret"), "s3cret", time.Time{})
	s, err := Open(e.snaps, e.ws, lim)
	if err != nil {
		t.Fatal(err)
	}
	e.s = s
	return e
}

var t0 = time.Date(2021, 3, 4, 5, 6, 7, 123456789, time.UTC)

func mustWrite(t *testing.T, p, content string, mtime time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if !mtime.IsZero() {
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
}

// populate fills a workspace with the usual cases.
func populate(t *testing.T, ws string) {
	t.Helper()
	mustWrite(t, filepath.Join(ws, "a.txt"), "hello\n", t0)
	mustWrite(t, filepath.Join(ws, "dir/nested/b.csv"), "x,y\n1,2\n", t0.Add(time.Hour))
	mustWrite(t, filepath.Join(ws, "bin.dat"), "\x00\xff\xfe binary", t0.Add(2*time.Hour))
	mustWrite(t, filepath.Join(ws, "html.txt"), "<b>&amp;</b> \u00e9\u4e2d", t0.Add(3*time.Hour))
	mustWrite(t, filepath.Join(ws, "new\nline"), "odd name", t0.Add(4*time.Hour))
	mustWrite(t, filepath.Join(ws, "run.sh"), "#!/bin/sh\n", t0.Add(5*time.Hour))
	if err := os.Chmod(filepath.Join(ws, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(ws, "run.sh"), t0, t0); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "empty"), 0o750); err != nil {
		t.Fatal(err)
	}
}

// state renders a tree (never following links) for comparison: every
// entry with its type, permission bits, and for files content and mtime.
func state(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch m := fi.Mode(); {
		case m.IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("file %v %s %q", m.Perm(), fi.ModTime().UTC().Format(time.RFC3339Nano), b)
		case m.IsDir():
			out[rel] = fmt.Sprintf("dir %v", m.Perm())
		case m&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "symlink " + target
		default:
			out[rel] = "other " + m.String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffStates(got, want map[string]string) string {
	var lines []string
	for k, v := range want {
		if got[k] != v {
			lines = append(lines, fmt.Sprintf("%q: got %q, want %q", k, got[k], v))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			lines = append(lines, fmt.Sprintf("%q: unexpected %q", k, v))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// docJSON mirrors the document layout in order, for tampering tests.
type docJSON struct {
	Format       string       `json:"format"`
	ID           string       `json:"id"`
	CreatedAt    time.Time    `json:"created_at"`
	Description  string       `json:"description"`
	Files        int          `json:"files"`
	Bytes        int64        `json:"bytes"`
	Skipped      []string     `json:"skipped,omitempty"`
	SkippedTotal int          `json:"skipped_total,omitempty"`
	Dirs         []DirRecord  `json:"dirs"`
	Entries      []FileRecord `json:"entries"`
}

func readDoc(t *testing.T, p string) docJSON {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var d docJSON
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func writeDocJSON(t *testing.T, p string, d docJSON) {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func uidOf(t *testing.T, p string) int {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

// leftovers lists restore debris next to and inside the workspace.
func leftovers(t *testing.T, e *env) []string {
	t.Helper()
	var out []string
	for _, dir := range []string{e.parent, e.ws} {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range ents {
			if strings.HasPrefix(x.Name(), ".pyjail-restore") {
				out = append(out, filepath.Join(dir, x.Name()))
			}
		}
	}
	ents, _ := os.ReadDir(e.snaps)
	for _, x := range ents {
		if strings.HasPrefix(x.Name(), tmpPrefix) || x.Name() == journalName {
			out = append(out, filepath.Join(e.snaps, x.Name()))
		}
	}
	return out
}
