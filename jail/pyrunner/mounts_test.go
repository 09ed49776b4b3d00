package pyrunner

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// mountScript runs the fork child's mount step without mounting anything:
// it decodes argv[2] (a ForkServer as JSON) with the fork server module's _mount_table
// and applies the rows with _apply_mounts through a fake mount(2) that
// records each call and fails with the errno argv[3] names for a target.
const mountScript = `import errno, json, os, sys
sys.path.insert(0, sys.argv[1])
import forkserver
fs, fails = json.loads(sys.argv[2]), json.loads(sys.argv[3]) or {}
out = {"rows": None, "error": None, "calls": [], "apply_error": None}
dec = lambda v: v.decode() if v is not None else None
try:
    table = forkserver._mount_table(fs)
except ValueError as e:
    out["error"] = str(e)
else:
    out["rows"] = [[dec(r[0]), dec(r[1]), dec(r[2]), r[3], dec(r[4])] for r in table]
    def mount(source, target, fstype, flags, data):
        out["calls"].append(dec(target))
        name = fails.get(dec(target))
        return getattr(errno, name) if name else 0
    try:
        forkserver._apply_mounts(mount, table)
    except OSError as e:
        out["apply_error"] = str(e)
print(json.dumps(out))
`

// mountRow is one decoded row: source, target, fstype, flags, data.
type mountRow [5]any

func TestForkChildMountTable(t *testing.T) {
	requirePython(t)
	s := newSandbox(t)
	missing := filepath.Join(s.Scratch, "absent")
	// 0xe is MS_NOSUID|MS_NODEV|MS_NOEXEC, the built-in table's flags.
	builtin := []mountRow{
		{"proc", "/proc", "proc", 14.0, nil},
		{"tmpfs", "/tmp", "tmpfs", 14.0, "mode=1777,size=1024"},
		{"tmpfs", "/dev/shm", "tmpfs", 14.0, "mode=1777,size=2048"},
	}
	table := []map[string]any{
		{"source": "tmpfs", "target": "/dev/shm", "fstype": "tmpfs", "flags": 6, "data": "size=1"},
		{"source": "proc", "target": "/proc", "fstype": "proc", "flags": 14, "data": nil},
		{"source": nil, "target": missing, "fstype": nil, "flags": 4096, "data": nil},
		{"source": "tmpfs", "target": "/tmp", "fstype": "tmpfs", "flags": 14, "data": "mode=1777,size=9"},
		{"source": "/dev/null", "target": s.Scratch, "fstype": nil, "flags": 4096 | 16384, "data": nil},
	}
	fromTable := []mountRow{
		{"tmpfs", "/dev/shm", "tmpfs", 6.0, "size=1"},
		{"proc", "/proc", "proc", 14.0, nil},
		{nil, missing, nil, 4096.0, nil},
		{"tmpfs", "/tmp", "tmpfs", 14.0, "mode=1777,size=9"},
		{"/dev/null", s.Scratch, nil, 20480.0, nil},
	}
	with := func(mounts any) map[string]any {
		return map[string]any{"tmp_bytes": 1024, "shm_bytes": 2048, "mounts": mounts}
	}
	entry := func(change func(map[string]any)) []map[string]any {
		m := []map[string]any{
			{"source": "proc", "target": "/proc", "fstype": "proc", "flags": 14},
			{"source": "tmpfs", "target": "/tmp", "fstype": "tmpfs", "flags": 14},
			{"source": "tmpfs", "target": "/dev/shm", "fstype": "tmpfs", "flags": 14},
		}
		change(m[0])
		return m
	}
	for name, tc := range map[string]struct {
		fs         map[string]any
		fails      map[string]string // target -> errno name
		rows       []mountRow
		calls      []string
		err        string // from _mount_table
		applyError string // from _apply_mounts, a substring
	}{
		"without a table, the built-in one": {
			fs:    map[string]any{"tmp_bytes": 1024, "shm_bytes": 2048},
			rows:  builtin,
			calls: []string{"/proc", "/tmp", "/dev/shm"},
		},
		"a null table is no table": {
			fs: with(nil), rows: builtin, calls: []string{"/proc", "/tmp", "/dev/shm"},
		},
		"the boot's table, in its order, flags as sent": {
			fs: with(table), rows: fromTable,
			calls: []string{"/dev/shm", "/proc", missing, "/tmp", s.Scratch},
		},
		"a missing target is skipped": {
			fs: with(table), fails: map[string]string{missing: "ENOENT"}, rows: fromTable,
			calls: []string{"/dev/shm", "/proc", missing, "/tmp", s.Scratch},
		},
		"a missing source is fatal": {
			fs: with(table), fails: map[string]string{s.Scratch: "ENOENT"}, rows: fromTable,
			calls:      []string{"/dev/shm", "/proc", missing, "/tmp", s.Scratch},
			applyError: "mounting " + s.Scratch + ": No such file or directory",
		},
		"any other failure stops the mounts": {
			fs: with(table), fails: map[string]string{"/proc": "EPERM"}, rows: fromTable,
			calls:      []string{"/dev/shm", "/proc"},
			applyError: "mounting /proc: Operation not permitted",
		},
		"flags must be an integer": {
			fs: with(entry(func(m map[string]any) { m["flags"] = "14" })), err: "flags must be an unsigned integer",
		},
		"flags are not a bool": {
			fs: with(entry(func(m map[string]any) { m["flags"] = true })), err: "flags must be an unsigned integer",
		},
		"flags are required": {
			fs: with(entry(func(m map[string]any) { delete(m, "flags") })), err: "flags must be an unsigned integer",
		},
		"the target is absolute": {
			fs: with(entry(func(m map[string]any) { m["target"] = "proc" })), err: "is not absolute",
		},
		"the target is a string": {
			fs: with(entry(func(m map[string]any) { m["target"] = nil })), err: "target must be a string",
		},
		"unknown keys are refused": {
			fs: with(entry(func(m map[string]any) { m["propagation"] = "shared" })), err: "want an object with target",
		},
		"the table replaces every per-child mount": {
			fs: with(table[1:2]), err: "no mount on /tmp, /dev/shm",
		},
		"the table is a list": {
			fs: with(map[string]any{}), err: "want a list",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fsJSON, _ := json.Marshal(tc.fs)
			failsJSON, _ := json.Marshal(tc.fails)
			out, err := exec.CommandContext(t.Context(), hostPython, "-I", "-B", "-c", mountScript,
				s.Runner, string(fsJSON), string(failsJSON)).CombinedOutput()
			if err != nil {
				t.Fatalf("mount script: %v\n%s", err, out)
			}
			var got struct {
				Rows       []mountRow `json:"rows"`
				Error      *string    `json:"error"`
				Calls      []string   `json:"calls"`
				ApplyError *string    `json:"apply_error"`
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("decoding %q: %v", out, err)
			}
			if tc.err != "" {
				if got.Error == nil || !strings.Contains(*got.Error, tc.err) {
					t.Fatalf("error %v, want one containing %q", deref(got.Error), tc.err)
				}
				return
			}
			if got.Error != nil {
				t.Fatalf("unexpected error %q", *got.Error)
			}
			if g, w := jsonString(got.Rows), jsonString(tc.rows); g != w {
				t.Errorf("rows\n got %s\nwant %s", g, w)
			}
			if g, w := strings.Join(got.Calls, " "), strings.Join(tc.calls, " "); g != w {
				t.Errorf("mount calls %q, want %q", g, w)
			}
			if g, w := deref(got.ApplyError), tc.applyError; (w == "") != (g == "") || !strings.Contains(g, w) {
				t.Errorf("apply error %q, want one containing %q", g, w)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
