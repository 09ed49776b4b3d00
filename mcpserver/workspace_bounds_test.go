package mcpserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyjail/pyjail/workspace/walk/walktest"
)

// TestWorkspaceLimits is issue 11 item 3 at the MCP boundary: with a
// 2,000-deep tree in the workspace (as a jail makes one), every workspace
// tool answers at once with the limit in plain words, or does its job
// (a listing shows what it could, a restore replaces the tree), and a
// write that would go too deep is refused before anything is created.
func TestWorkspaceLimits(t *testing.T) {
	h := newHarness(t, nil)
	h.mustOK(toolWriteFile, map[string]any{"path": "a.txt", "content": "hello"})
	snap := structuredAs[snapMeta](t, h.mustOK(toolCreateSnapshot, nil))

	deep := strings.Repeat("d/", 2000) + "x.txt"
	h.mustFail(toolWriteFile, map[string]any{"path": deep, "content": "x"},
		"would be under 2,000 nested directories; the limit is 64", "nothing was written")
	if _, err := os.Lstat(filepath.Join(h.ws, "d")); err == nil {
		t.Fatal("a refused write created directories")
	}

	walktest.Chain(t, h.ws, 2000, "")
	const limit = "workspace has more than 64 nested directories"
	for name, tc := range map[string]struct {
		tool string
		args map[string]any
		fail bool
		want []string
	}{
		"write":           {tool: toolWriteFile, args: map[string]any{"path": "b.txt", "content": "x"}, fail: true, want: []string{limit, "the limit is 64", "nothing was written"}},
		"list":            {tool: toolListFiles, want: []string{"65 entries under .", "the listing stopped because the " + limit}},
		"create snapshot": {tool: toolCreateSnapshot, fail: true, want: []string{limit, "no snapshot was stored"}},
		"diff snapshot":   {tool: toolDiffSnapshot, args: map[string]any{"snapshot_id": snap.ID}, fail: true, want: []string{limit}},
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			if tc.fail {
				h.mustFail(tc.tool, tc.args, tc.want...)
			} else {
				res := h.mustOK(tc.tool, tc.args)
				for _, w := range tc.want {
					if !strings.Contains(text(res), w) {
						t.Errorf("text %q lacks %q", text(res), w)
					}
				}
			}
			// Generous: these took 10 s and more before.
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("%s took %v", tc.tool, d)
			}
		})
	}

	// The way out: restoring replaces the deep tree, and says the list of
	// what it deleted is partial.
	res := h.mustOK(toolRestoreSnapshot, map[string]any{"snapshot_id": snap.ID})
	if got := structuredAs[restoreReport](t, res); !strings.Contains(got.Note, limit) {
		t.Errorf("restore note = %q, want it to name the limit", got.Note)
	}
	if _, err := os.Lstat(filepath.Join(h.ws, "d")); err == nil {
		t.Error("the deep tree survived the restore")
	}
	h.mustOK(toolWriteFile, map[string]any{"path": "b.txt", "content": "x"})
}
