package mcpserver

import (
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyjail/pyjail/mcpserver/fake"
	"github.com/pyjail/pyjail/record"
)

func TestWorkspaceFiles(t *testing.T) {
	h := newHarness(t, nil)
	binary := []byte{0xff, 0x00, 0xfe, 'P', 'N', 'G'}

	res := h.mustOK(toolWriteFile, map[string]any{"path": "dir/a.txt", "content": "héllo\n"})
	fi := structuredAs[record.FileInfo](t, res)
	if fi.Path != "dir/a.txt" || fi.Size != int64(len("héllo\n")) {
		t.Errorf("write returned %+v", fi)
	}
	if got, err := os.ReadFile(filepath.Join(h.ws, "dir", "a.txt")); err != nil || string(got) != "héllo\n" {
		t.Errorf("file on disk = %q, %v", got, err)
	}
	h.mustOK(toolWriteFile, map[string]any{"path": "bin.dat", "content": base64.StdEncoding.EncodeToString(binary), "encoding": "base64"})

	for name, tc := range map[string]struct {
		args         map[string]any
		wantEncoding string
		wantContent  string
		wantEOF      bool
	}{
		"text":          {map[string]any{"path": "dir/a.txt"}, "utf-8", "héllo\n", true},
		"binary":        {map[string]any{"path": "bin.dat"}, "base64", base64.StdEncoding.EncodeToString(binary), true},
		"range":         {map[string]any{"path": "dir/a.txt", "offset": 3, "length": 2}, "utf-8", "ll", false},
		"past the end":  {map[string]any{"path": "dir/a.txt", "offset": 100}, "utf-8", "", true},
		"length capped": {map[string]any{"path": "bin.dat", "length": 1 << 40}, "base64", base64.StdEncoding.EncodeToString(binary), true},
	} {
		t.Run(name, func(t *testing.T) {
			c := structuredAs[fileChunk](t, h.mustOK(toolReadFile, tc.args))
			if c.Encoding != tc.wantEncoding || c.Content != tc.wantContent || c.EOF != tc.wantEOF {
				t.Errorf("read = %+v, want %s %q eof=%v", c, tc.wantEncoding, tc.wantContent, tc.wantEOF)
			}
		})
	}

	list := structuredAs[fileList](t, h.mustOK(toolListFiles, nil))
	var paths []string
	for _, e := range list.Entries {
		paths = append(paths, e.Path+":"+e.Type)
	}
	for _, want := range []string{"dir/a.txt:file", "bin.dat:file"} {
		if !strings.Contains(strings.Join(paths, " "), want) {
			t.Errorf("list %v lacks %s", paths, want)
		}
	}
	sub := structuredAs[fileList](t, h.mustOK(toolListFiles, map[string]any{"path": "dir"}))
	if len(sub.Entries) != 1 {
		t.Errorf("list dir = %+v", sub.Entries)
	}
}

func TestWorkspaceFilesBadInput(t *testing.T) {
	h := newHarness(t, nil)
	outside := filepath.Join(filepath.Dir(h.ws), "outside.txt")
	if err := os.Symlink(filepath.Dir(h.ws), filepath.Join(h.ws, "link")); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		tool string
		args map[string]any
		want []string
	}{
		"write dotdot":       {toolWriteFile, map[string]any{"path": "../outside.txt", "content": "x"}, []string{"outside the workspace"}},
		"write absolute":     {toolWriteFile, map[string]any{"path": outside, "content": "x"}, []string{outside}},
		"write via symlink":  {toolWriteFile, map[string]any{"path": "link/outside.txt", "content": "x"}, []string{"link/outside.txt"}},
		"invalid base64":     {toolWriteFile, map[string]any{"path": "a", "content": "!!!", "encoding": "base64"}, []string{"not valid base64"}},
		"unknown encoding":   {toolWriteFile, map[string]any{"path": "a", "content": "x", "encoding": "latin-1"}, []string{"encoding"}},
		"missing content":    {toolWriteFile, map[string]any{"path": "a"}, []string{"content"}},
		"empty path":         {toolWriteFile, map[string]any{"path": "", "content": "x"}, []string{"path"}},
		"read missing":       {toolReadFile, map[string]any{"path": "nope.txt"}, []string{"nope.txt"}},
		"read dotdot":        {toolReadFile, map[string]any{"path": "../../etc/passwd"}, []string{"outside the workspace"}},
		"read a directory":   {toolReadFile, map[string]any{"path": "."}, []string{"."}},
		"negative offset":    {toolReadFile, map[string]any{"path": "a", "offset": -1}, []string{"offset"}},
		"zero length":        {toolReadFile, map[string]any{"path": "a", "length": 0}, []string{"length"}},
		"list outside":       {toolListFiles, map[string]any{"path": "../"}, []string{"outside the workspace"}},
		"list missing":       {toolListFiles, map[string]any{"path": "nope"}, []string{"nope"}},
		"path of wrong type": {toolListFiles, map[string]any{"path": 3}, []string{"path"}},
	} {
		t.Run(name, func(t *testing.T) {
			h.mustFail(tc.tool, tc.args, tc.want...)
		})
	}
	if _, err := os.Stat(outside); err == nil {
		t.Errorf("a write escaped the workspace to %s", outside)
	}
}

func TestSnapshots(t *testing.T) {
	h := newHarness(t, nil)
	write := func(p, content string) {
		t.Helper()
		h.mustOK(toolWriteFile, map[string]any{"path": p, "content": content})
	}
	write("keep.txt", "v1")
	write("change.txt", "before")

	created := structuredAs[snapMeta](t, h.mustOK(toolCreateSnapshot, map[string]any{"description": "baseline"}))
	if created.ID == "" || created.Description != "baseline" || created.Files != 2 {
		t.Fatalf("created %+v", created)
	}
	write("change.txt", "after")
	write("new.txt", "n")

	diff := structuredAs[diffReport](t, h.mustOK(toolDiffSnapshot, map[string]any{"snapshot_id": created.ID}))
	if strings.Join(diff.Added, ",") != "new.txt" || strings.Join(diff.Modified, ",") != "change.txt" || len(diff.Removed) != 0 || diff.Unchanged != 1 {
		t.Errorf("diff = %+v", diff)
	}

	second := structuredAs[snapMeta](t, h.mustOK(toolCreateSnapshot, nil))
	list := structuredAs[snapshotList](t, h.mustOK(toolListSnapshots, nil))
	if len(list.Snapshots) != 2 || list.Snapshots[0].ID != second.ID || list.Snapshots[1].ID != created.ID {
		t.Errorf("list (newest first) = %+v", list.Snapshots)
	}

	rep := structuredAs[restoreReport](t, h.mustOK(toolRestoreSnapshot, map[string]any{"snapshot_id": created.ID}))
	if strings.Join(rep.Written, ",") != "change.txt" || strings.Join(rep.Deleted, ",") != "new.txt" || rep.Unchanged != 1 {
		t.Errorf("restore = %+v", rep)
	}
	if got, _ := os.ReadFile(filepath.Join(h.ws, "change.txt")); string(got) != "before" {
		t.Errorf("change.txt after restore = %q", got)
	}
	if _, err := os.Stat(filepath.Join(h.ws, "new.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("new.txt survived the restore: %v", err)
	}

	h.mustOK(toolDeleteSnapshot, map[string]any{"snapshot_id": second.ID})
	list = structuredAs[snapshotList](t, h.mustOK(toolListSnapshots, nil))
	if len(list.Snapshots) != 1 {
		t.Errorf("after delete: %+v", list.Snapshots)
	}

	const unknown = "3f2504e0-4f89-41d3-9a0c-0305e82c3301"
	for name, tc := range map[string]struct {
		tool string
		args map[string]any
		want []string
	}{
		"restore unknown":   {toolRestoreSnapshot, map[string]any{"snapshot_id": unknown}, []string{unknown, "list_state_snapshots"}},
		"delete unknown":    {toolDeleteSnapshot, map[string]any{"snapshot_id": unknown}, []string{unknown}},
		"diff unknown":      {toolDiffSnapshot, map[string]any{"snapshot_id": unknown}, []string{unknown}},
		"delete twice":      {toolDeleteSnapshot, map[string]any{"snapshot_id": second.ID}, []string{second.ID}},
		"restore traversal": {toolRestoreSnapshot, map[string]any{"snapshot_id": "../../etc/passwd"}, []string{"not a snapshot id"}},
		"id missing":        {toolRestoreSnapshot, map[string]any{}, []string{"snapshot_id"}},
		"id wrong type":     {toolDiffSnapshot, map[string]any{"snapshot_id": 7}, []string{"snapshot_id"}},
		"list with args":    {toolListSnapshots, map[string]any{"all": true}, []string{"all"}},
		"description long":  {toolCreateSnapshot, map[string]any{"description": strings.Repeat("d", 2000)}, []string{"description"}},
	} {
		t.Run(name, func(t *testing.T) {
			h.mustFail(tc.tool, tc.args, tc.want...)
		})
	}
}

func TestSnapshotsWithoutStore(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.SnapshotDir = "" })
	h.mustFail(toolCreateSnapshot, nil, "no snapshot store", "--snapshots")
	h.mustOK(toolWriteFile, map[string]any{"path": "a", "content": "b"})
}

// TestRestoreWaitsForWorkspaceRuns checks SPEC §6's exclusion: a restore
// never interleaves with a run that writes the workspace, while runs still
// overlap each other.
func TestRestoreWaitsForWorkspaceRuns(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Runner = &fake.Runner{Block: true} })
	h.mustOK(toolWriteFile, map[string]any{"path": "a.txt", "content": "1"})
	snap := structuredAs[snapMeta](t, h.mustOK(toolCreateSnapshot, nil))

	var runs sync.WaitGroup
	for range 2 {
		runs.Go(func() { h.call(toolRunSandboxCode, map[string]any{"code": "open('a.txt','w').write('2')"}) })
	}
	waitFor(t, "both runs to start", func() bool { return h.runner.InFlight() == 2 })

	restored := make(chan struct{})
	go func() {
		defer close(restored)
		h.call(toolRestoreSnapshot, map[string]any{"snapshot_id": snap.ID})
	}()
	select {
	case <-restored:
		t.Fatal("restore ran while workspace runs were in flight")
	case <-time.After(200 * time.Millisecond):
	}
	h.runner.Release()
	runs.Wait()
	select {
	case <-restored:
	case <-time.After(5 * time.Second):
		t.Fatal("restore did not finish after the runs")
	}
}
