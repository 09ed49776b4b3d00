package pyrunner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/pyjail/pyjail/policy"
)

// hostPython is the Debian interpreter with numpy, pandas, scipy, sympy and
// matplotlib; the pyenv python3 on PATH has none of them.
const hostPython = "/usr/bin/python3"

// requirePython skips without the host interpreter, unless CI demands the
// test run (PYJAIL_TEST_MUST_RUN=1, bubblewrap's BWRAP_MUST_WORK).
func requirePython(tb testing.TB) {
	tb.Helper()
	if _, err := os.Stat(hostPython); err != nil {
		if os.Getenv("PYJAIL_TEST_MUST_RUN") == "1" {
			tb.Fatalf("PYJAIL_TEST_MUST_RUN=1 but %s is missing: %v", hostPython, err)
		}
		tb.Skipf("%s is missing: %v", hostPython, err)
	}
}

// sandbox is the file layout one runner sees in a test: a directory holding
// the runner, a workspace and, next to it, a secret that every escape probe
// tries to read (its content says ESCAPED, so a leak shows in stdout).
type sandbox struct {
	Runner    string // the runner's directory, where Files are installed
	Workspace string
	Scratch   string // cwd for layers without a workspace
	Secret    string
	MPL       string
}

func newSandbox(tb testing.TB) sandbox {
	tb.Helper()
	root := tb.TempDir()
	s := sandbox{
		Runner:    filepath.Join(root, "opt"),
		Workspace: filepath.Join(root, "jail", "workspace"),
		Scratch:   filepath.Join(root, "jail", "scratch"),
		Secret:    filepath.Join(root, "jail", "secret.txt"),
		MPL:       filepath.Join(root, "mpl"),
	}
	for _, d := range []string{s.Runner, s.Workspace, s.Scratch, s.MPL} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	installFiles(tb, s.Runner)
	if err := os.WriteFile(s.Secret, []byte("ESCAPED-SECRET\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Workspace, "data.csv"), []byte("a,b\n1,2\n3,4\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	// The same links in the workspace and in the calc layer's cwd, so
	// probes meet them whichever layer runs them.
	for _, d := range []string{s.Workspace, s.Scratch} {
		if err := os.Symlink(s.Secret, filepath.Join(d, "link_out")); err != nil {
			tb.Fatal(err)
		}
		if err := os.Symlink("data.csv", filepath.Join(d, "link_in")); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

// installFiles writes the runner's modules into dir, as the jail does
// (without the bytecode: the tests run the source).
func installFiles(tb testing.TB, dir string) {
	tb.Helper()
	names, err := fs.Glob(Files, "*.py")
	if err != nil || len(names) == 0 {
		tb.Fatalf("no runner modules in Files: %v", err)
	}
	for _, name := range names {
		b, err := Files.ReadFile(name)
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o444); err != nil {
			tb.Fatal(err)
		}
	}
}

// bootFor builds the Boot the jail would send for layer.
func bootFor(s sandbox, layer policy.PythonLayer) Boot {
	b := Boot{Layer: string(layer), ValueBytes: 4096, ImageBytes: 1 << 20, Policy: policy.PythonPolicy(layer)}
	if layer == policy.LayerWorkspace || layer == policy.LayerNone {
		b.Workspace = s.Workspace
	}
	return b
}

type runOutput struct {
	Stdout, Stderr string
	Ready          Message
	Reply          Reply
	// Elapsed is the whole run, process start to exit; Exec is the time
	// from sending the code to reading the reply, what a warm jail costs.
	Elapsed, Exec time.Duration
	// CPU is the runner's user+system time, less noisy than wall time on
	// a busy machine.
	CPU time.Duration
}

// runRunner starts the runner like the jail does (python3 -I -B -c
// Bootstrap, control pipes on fd 3 and 4), sends boot and code, and
// returns what came back.
func runRunner(tb testing.TB, ctx context.Context, s sandbox, boot Boot, code string) runOutput {
	tb.Helper()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	inR, inW, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	defer inW.Close()
	defer outR.Close()
	cmd := exec.CommandContext(ctx, hostPython, "-I", "-B", "-c", Bootstrap(s.Runner))
	cmd.ExtraFiles = []*os.File{inR, outW}
	cmd.Dir = s.Scratch
	if boot.Workspace != "" {
		cmd.Dir = boot.Workspace
	}
	cmd.Env = []string{
		"PATH=/usr/bin:/bin", "HOME=" + s.Scratch, "LANG=C.UTF-8",
		"OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1",
		"MPLBACKEND=Agg", "MPLCONFIGDIR=" + s.MPL, "PYTHONDONTWRITEBYTECODE=1",
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	inR.Close()
	outW.Close()
	enc := json.NewEncoder(inW)
	if err := enc.Encode(boot); err != nil {
		tb.Fatal(err)
	}
	lines := bufio.NewReader(outR)
	var out runOutput
	readMsg := func(want string) Message {
		line, err := lines.ReadBytes('\n')
		if err != nil {
			_ = cmd.Wait()
			tb.Fatalf("reading %s message: %v\nstdout: %s\nstderr: %s", want, err, stdout.String(), stderr.String())
		}
		var m Message
		if err := json.Unmarshal(line, &m); err != nil {
			tb.Fatalf("decoding %q: %v", line, err)
		}
		if m.Type != want {
			tb.Fatalf("got message %q, want %q", m.Type, want)
		}
		return m
	}
	out.Ready = readMsg("ready")
	execStart := time.Now()
	if err := enc.Encode(Exec{Code: code}); err != nil {
		tb.Fatal(err)
	}
	inW.Close()
	m := readMsg("reply")
	out.Exec = time.Since(execStart)
	if boot.Workspace != "" {
		// A runner with a workspace waits after its reply for the kill
		// that ends every jail (the supervisor freezes it first): end it
		// as the supervisor does. Its output streams are closed already.
		_ = cmd.Process.Kill()
	}
	_ = cmd.Wait()
	out.Elapsed = time.Since(start)
	if ps := cmd.ProcessState; ps != nil {
		out.CPU = ps.UserTime() + ps.SystemTime()
	}
	if m.Reply == nil {
		tb.Fatalf("reply message without reply; stderr: %s", stderr.String())
	}
	out.Reply = *m.Reply
	out.Stdout, out.Stderr = stdout.String(), stderr.String()
	return out
}

func (o runOutput) String() string {
	b, _ := json.Marshal(o.Reply)
	return fmt.Sprintf("reply: %s\nstdout: %s\nstderr: %s", b, o.Stdout, o.Stderr)
}

// jsonString renders v as JSON, which Python reads as a literal too.
func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
