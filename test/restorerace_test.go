//go:build linux

package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pyjail/pyjail/rootfs"
)

// stdioClient speaks newline-delimited JSON-RPC to a `pyjail serve` over
// its stdin and stdout.
type stdioClient struct {
	t   *testing.T
	in  io.Writer
	out *bufio.Scanner
	id  int
}

// call sends method with params and returns the result of the answer with
// its id, failing the test on a JSON-RPC error.
func (c *stdioClient) call(method string, params any) json.RawMessage {
	c.t.Helper()
	c.id++
	c.send(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params})
	for c.out.Scan() {
		var msg struct {
			ID     *int            `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(c.out.Bytes(), &msg); err != nil {
			c.t.Fatalf("undecodable line from the server: %v: %q", err, c.out.Text())
		}
		if msg.ID == nil || *msg.ID != c.id {
			continue // a notification
		}
		if msg.Error != nil {
			c.t.Fatalf("%s: JSON-RPC error %s", method, msg.Error)
		}
		return msg.Result
	}
	c.t.Fatalf("%s: the server closed its stdout: %v", method, c.out.Err())
	return nil
}

func (c *stdioClient) send(msg any) {
	c.t.Helper()
	b, _ := json.Marshal(msg)
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		c.t.Fatal(err)
	}
}

// toolResult is the part of a tools/call result this test reads.
type toolResult struct {
	IsError bool `json:"isError"`
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
}

func (c *stdioClient) tool(name string, args map[string]any) toolResult {
	c.t.Helper()
	var r toolResult
	if err := json.Unmarshal(c.call("tools/call", map[string]any{"name": name, "arguments": args}), &r); err != nil {
		c.t.Fatal(err)
	}
	return r
}

func (r toolResult) text() string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// TestRestoreRacingCLIRun (issue 27, item 5): while `pyjail run --profile
// full --workspace DIR` swaps files and symlinks in DIR, the stdio server
// on DIR answers restore_state_snapshot calls. The CLI run takes the
// workspace lock shared (dirlock.WorkspaceLockFile), so the restores,
// exclusive, wait for it or say the workspace is busy, and once both have
// ended nothing of a restore (.pyjail-restore-…) is left beside DIR.
func TestRestoreRacingCLIRun(t *testing.T) {
	e := sharedEnv(t)
	bin := pyjailBinary(t)
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("snapshot"), 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir := runDir("pyjail-test-restorerace")
	t.Cleanup(func() { _ = os.RemoveAll(stateDir) })
	cfgFile := filepath.Join(t.TempDir(), "config.json")
	cfgJSON := fmt.Sprintf(`{"state_dir": %q, "cgroup_parent": "/pyjail-test-restorerace", "id_map": {"host_id": 210000000, "size": 65536, "sandbox_id": 1000}}`, stateDir)
	if err := os.WriteFile(cfgFile, []byte(cfgJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	rootfsArg := "host"
	if e.layout.Kind == rootfs.KindDebian {
		rootfsArg = e.layout.Root
	}

	server := exec.Command(bin, "serve", "--config", cfgFile, "--rootfs", rootfsArg, "--no-warm",
		"--workspace", ws, "--snapshots", filepath.Join(base, "snaps"))
	stdin, err := server.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		_ = server.Wait()
	}()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	c := &stdioClient{t: t, in: stdin, out: sc}
	c.call("initialize", map[string]any{"protocolVersion": "2025-03-26", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "restorerace", "version": "1"}})
	c.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	snap := c.tool("create_state_snapshot", map[string]any{"description": "before the run"})
	id := uuidRE.FindString(snap.text())
	if snap.IsError || id == "" {
		t.Fatalf("create_state_snapshot: %s", snap.text())
	}

	// The run swaps files and symlinks for a while, the 25 s
	// shortened.
	code := `import os, time
end = time.time() + 8
i = 0
while time.time() < end:
    n = "f%d" % (i % 20)
    open(n + ".tmp", "w").write(str(i))
    os.replace(n + ".tmp", n)
    try:
        os.remove("link")
    except FileNotFoundError:
        pass
    os.symlink(n, "link")
    i += 1
print("swaps", i)
`
	run := exec.Command(bin, "run", "--config", cfgFile, "--rootfs", rootfsArg, "--profile", "full", "--workspace", ws, "--timeout", "60", "-c", code)
	var runOut strings.Builder
	run.Stdout, run.Stderr = &runOut, &runOut
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	runDone := make(chan error, 1)
	go func() { runDone <- run.Wait() }()
	// The run is under way once its first symlink is there.
	for deadline := time.Now().Add(slow(30 * time.Second)); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Lstat(filepath.Join(ws, "link")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the CLI run never started swapping: %s", runOut.String())
		}
	}
	ok := 0
	for i := range 10 {
		r := c.tool("restore_state_snapshot", map[string]any{"snapshot_id": id})
		switch {
		case !r.IsError:
			ok++
		case strings.Contains(r.text(), "busy"):
		default:
			t.Errorf("restore %d: %s", i, r.text())
		}
	}
	if err := <-runDone; err != nil {
		t.Fatalf("the CLI run: %v\n%s", err, runOut.String())
	}
	if !strings.Contains(runOut.String(), "swaps") {
		t.Errorf("the CLI run did not finish its swaps: %s", runOut.String())
	}
	if ok == 0 {
		t.Errorf("no restore succeeded")
	}
	ents, err := os.ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range ents {
		if strings.HasPrefix(ent.Name(), ".pyjail-restore") {
			t.Errorf("left beside the workspace: %s", ent.Name())
		}
	}
	// The last restore came after the run: the workspace is the snapshot.
	got, _ := os.ReadDir(ws)
	var names []string
	for _, g := range got {
		names = append(names, g.Name())
	}
	if len(names) != 1 || names[0] != "a.txt" {
		t.Errorf("workspace after the restores: %v, want the snapshot's [a.txt]", names)
	}
}
