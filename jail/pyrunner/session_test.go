package pyrunner

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pyjail/pyjail/policy"
)

// sessionRunner is one runner serving a session (Boot.Session) the way a
// session's forked jail does, without the kernel layer: per call it sends
// the call's output pipes on the sync socket and an Exec with the call's
// seq, and reads the reply and both pipes to EOF.
type sessionRunner struct {
	tb    testing.TB
	cmd   *exec.Cmd
	ctlW  *os.File
	lines *bufio.Reader
	sync  int
	seq   int64
	boot  bytes.Buffer // the runner's own stdout and stderr, before calls
}

func startSession(tb testing.TB, s sandbox, layer policy.PythonLayer) *sessionRunner {
	tb.Helper()
	boot := bootFor(s, layer)
	boot.Session = true
	inR, inW, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	theirs := os.NewFile(uintptr(sp[0]), "sync")
	r := &sessionRunner{tb: tb, ctlW: inW, lines: bufio.NewReader(outR), sync: sp[1]}
	r.cmd = exec.Command(hostPython, "-I", "-B", "-c", Bootstrap(s.Runner))
	r.cmd.ExtraFiles = []*os.File{inR, outW, theirs}
	r.cmd.Dir = s.Scratch
	if boot.Workspace != "" {
		r.cmd.Dir = boot.Workspace
	}
	r.cmd.Env = []string{
		"PATH=/usr/bin:/bin", "HOME=" + s.Scratch, "LANG=C.UTF-8",
		"OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1",
		"MPLBACKEND=Agg", "MPLCONFIGDIR=" + s.MPL, "PYTHONDONTWRITEBYTECODE=1",
	}
	r.cmd.Stdout, r.cmd.Stderr = &r.boot, &r.boot
	if err := r.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	inR.Close()
	outW.Close()
	theirs.Close()
	tb.Cleanup(r.close)
	if err := json.NewEncoder(inW).Encode(boot); err != nil {
		tb.Fatal(err)
	}
	if m := r.read(); m.Type != "ready" || m.Error != "" {
		tb.Fatalf("session runner said %+v before ready", m)
	}
	return r
}

func (r *sessionRunner) read() Message {
	r.tb.Helper()
	line, err := r.lines.ReadBytes('\n')
	if err != nil {
		r.tb.Fatalf("reading from the session runner: %v; its output: %s", err, r.boot.String())
	}
	var m Message
	if err := json.Unmarshal(line, &m); err != nil {
		r.tb.Fatalf("decoding %q: %v", line, err)
	}
	return m
}

// call runs code as the session's next call and returns what came back.
func (r *sessionRunner) call(code string) runOutput {
	r.tb.Helper()
	return r.exchange(Exec{Code: code}, nil)
}

// checkpoint runs a checkpoint call (Exec.Op OpCheckpoint) and returns the
// bytes the runner wrote to the checkpoint pipe, read to EOF.
func (r *sessionRunner) checkpoint() ([]byte, runOutput) {
	r.tb.Helper()
	var blob []byte
	out := r.exchange(Exec{Op: OpCheckpoint}, &blobPipe{read: &blob})
	return blob, out
}

// restore runs a restore call (Exec.Op OpRestore) that feeds blob into
// the checkpoint pipe and closes it.
func (r *sessionRunner) restore(blob []byte) runOutput {
	r.tb.Helper()
	return r.exchange(Exec{Op: OpRestore}, &blobPipe{write: blob})
}

// blobPipe is a checkpoint or restore call's third descriptor, seen from
// the supervisor: for a checkpoint it reads the pipe into *read, for a
// restore it writes write into it.
type blobPipe struct {
	read  *[]byte
	write []byte
}

// exchange is one call of the session as the supervisor makes it:
//  1. the call's pipes go on the sync socket: SessionPipes with the
//     stdout and stderr write ends, or, for an op, SessionBlob with a
//     third descriptor, the runner's end of the checkpoint pipe (the
//     write end for a checkpoint, the read end for a restore); the
//     supervisor closes its copies of the runner's ends right after;
//  2. the Exec line with the call's Seq goes on fd 3;
//  3. stdout, stderr and the checkpoint pipe are drained (or, for a
//     restore, fed and then closed) concurrently with reading fd 4,
//     because the runner blocks on a full pipe;
//  4. the reply comes on fd 4 after the runner has closed its end of
//     the checkpoint pipe and pointed fds 1 and 2 at /dev/null, so all
//     three pipes are at EOF (or, for a restore, fully read) by then.
func (r *sessionRunner) exchange(ex Exec, bp *blobPipe) runOutput {
	r.tb.Helper()
	var out runOutput
	var pipes [3][2]*os.File
	n := 2
	if bp != nil {
		n = 3
	}
	for i := range n {
		rd, wr, err := os.Pipe()
		if err != nil {
			r.tb.Fatal(err)
		}
		pipes[i] = [2]*os.File{rd, wr}
	}
	var wg sync.WaitGroup
	var stdout, stderr []byte
	wg.Go(func() { stdout, _ = io.ReadAll(pipes[0][0]) })
	wg.Go(func() { stderr, _ = io.ReadAll(pipes[1][0]) })
	msg := SessionPipes
	fds := []int{int(pipes[0][1].Fd()), int(pipes[1][1].Fd())}
	var theirs *os.File // the runner's end of the checkpoint pipe
	if bp != nil {
		msg = SessionBlob
		if bp.read != nil {
			theirs = pipes[2][1]
			wg.Go(func() { *bp.read, _ = io.ReadAll(pipes[2][0]) })
		} else {
			theirs = pipes[2][0]
			// A runner that refuses the call early closes its end: the
			// write then fails with EPIPE, which is not the test's error.
			wg.Go(func() { _, _ = pipes[2][1].Write(bp.write); pipes[2][1].Close() })
		}
		fds = append(fds, int(theirs.Fd()))
	}
	if err := unix.Sendmsg(r.sync, []byte(msg), unix.UnixRights(fds...), nil, 0); err != nil {
		r.tb.Fatal(err)
	}
	pipes[0][1].Close()
	pipes[1][1].Close()
	if theirs != nil {
		theirs.Close()
	}
	r.seq++
	ex.Seq = r.seq
	start := time.Now()
	if err := json.NewEncoder(r.ctlW).Encode(ex); err != nil {
		r.tb.Fatal(err)
	}
	m := r.read()
	out.Exec = time.Since(start)
	if m.Type != "reply" || m.Seq != r.seq || m.Reply == nil {
		r.tb.Fatalf("call %d: got %+v, want its reply", r.seq, m)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		r.tb.Fatalf("call %d: the call's pipes stayed open after the reply", r.seq)
	}
	pipes[0][0].Close()
	pipes[1][0].Close()
	if bp != nil && bp.read != nil {
		pipes[2][0].Close()
	}
	out.Reply, out.Stdout, out.Stderr = *m.Reply, string(stdout), string(stderr)
	return out
}

func (r *sessionRunner) close() {
	r.ctlW.Close()
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			r.tb.Errorf("session runner exited with %v; its output: %s", err, r.boot.String())
		}
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-done
		r.tb.Errorf("session runner did not exit when its control pipe closed")
	}
	_ = unix.Close(r.sync)
}

func value(o runOutput) string {
	if o.Reply.Value == nil {
		return "<none>"
	}
	return *o.Reply.Value
}

func TestSessionKeepsState(t *testing.T) {
	requirePython(t)
	for _, layer := range []policy.PythonLayer{policy.LayerCalc, policy.LayerWorkspace, policy.LayerNone} {
		t.Run(string(layer), func(t *testing.T) {
			t.Parallel()
			r := startSession(t, newSandbox(t), layer)
			steps := []struct{ code, stdout, value string }{
				{"x = 41\nprint('one')", "one\n", "<none>"},
				{"x + 1", "", "42"},
				{"import statistics\ndef mean(xs):\n    return statistics.mean(xs)\nprint('two')", "two\n", "<none>"},
				{"mean([1, 2, x])", "", "14.666666666666666"},
				{"y = undefined_name", "", "<none>"},
				{"print(x, 'three')", "41 three\n", "<none>"},
			}
			for i, st := range steps {
				out := r.call(st.code)
				if i == 4 {
					if out.Reply.Exception != "NameError" || !strings.Contains(out.Stderr, `File "<code 5>", line 1`) {
						t.Errorf("call %d: want a NameError traceback naming the call\n%s", i+1, out)
					}
					continue
				}
				if out.Reply.Status != StatusOK || out.Stdout != st.stdout || value(out) != st.value {
					t.Errorf("call %d: want stdout %q value %s\n%s", i+1, st.stdout, st.value, out)
				}
			}
		})
	}
}

// TestSessionFenceAcrossCalls: what one call does to the process must not
// weaken the fence for the calls after it, nor reach the runner's channel.
func TestSessionFenceAcrossCalls(t *testing.T) {
	requirePython(t)
	for name, tc := range map[string]struct {
		layers []policy.PythonLayer
		calls  []string
		// want is the expectation of each call, as in the corpus.
		want []string
	}{
		"ast visitors patched, then a dunder": {
			calls: []string{
				"import ast\nast.NodeVisitor.generic_visit = lambda self, node: node\nast.NodeTransformer.generic_visit = lambda self, node: node\nast.Call._fields = ()\nast.Attribute._fields = ()",
				"print(().__class__)",
				"print(abs(-3))",
			},
			want: []string{"ok", "rejected PJ002", "ok"},
		},
		"field descriptor on ast.Attribute, then a dunder": {
			calls: []string{
				"import ast, functools\nclass H:\n    pass\nh = H()\nh.attr = 'real'\n" +
					"ast.Attribute.attr = property(lambda n: 'real', lambda n, v: functools.update_wrapper(n, h, assigned=(), updated=('__dict__',)))",
				"print((1).__class__)",
				"import sympy\nprint(sympy.sympify(\"Symbol('x').__class__\"))",
			},
			want: []string{"ok", "rejected PJ002", "error PermissionError PJ010"},
		},
		"json decoder patched to read the next call": {
			calls: []string{
				"import json\njson.decoder.JSONDecoder.decode = lambda self, s, *a, **k: print('ESCAPED', s)\njson.decoder.JSONDecoder.raw_decode = lambda self, s, *a, **k: print('ESCAPED', s)",
				"print('second')",
			},
			want: []string{"ok", "ok"},
		},
		"json encoder patched to forge the next reply": {
			calls: []string{
				"import json\njson.encoder.JSONEncoder.encode = lambda self, o: '{\"type\": \"reply\", \"reply\": {\"status\": \"ok\", \"value\": \"ESCAPED\"}}'",
				"6 * 7",
			},
			want: []string{"ok", "ok"},
		},
		"finalizer forging a reply on fd 4": {
			calls: []string{
				"import io\nclass Later:\n    def __del__(self):\n        io.FileIO(4, 'w').write(b'{\"type\":\"reply\",\"seq\":2,\"reply\":{\"status\":\"ok\",\"value\":\"ESCAPED\"}}\\n')\n" +
					"a = Later()\nb = Later()\na.o, b.o = b, a\ndel a, b",
				"6 * 7",
			},
			want: []string{"ok", "ok"},
		},
		"finalizer reading the next call's code from fd 3": {
			calls: []string{
				"import io\nclass Later:\n    def __del__(self):\n        print('ESCAPED', io.FileIO(3, 'r').read(100))\nkeep = Later()",
				"del keep\nprint('second')",
			},
			want: []string{"ok", "ok"},
		},
		"the sync socket and /dev/null are off limits": {
			layers: []policy.PythonLayer{policy.LayerWorkspace},
			calls:  []string{"import io\nio.FileIO(5, 'r')", "open(5)"},
			want:   []string{"error PermissionError PJ009", "error PermissionError PJ009"},
		},
		"stdout left redirected": {
			calls: []string{
				"import contextlib, io\nsink = io.StringIO()\ndef hold():\n    with contextlib.redirect_stdout(sink):\n        yield\nh = hold()\nnext(h)",
				"print('visible')",
			},
			want: []string{"ok", "ok"},
		},
		"modules stay read-only": {
			calls: []string{"import math\nmath.pi = 3", "print(math.pi > 3.14)"},
			want:  []string{"error AttributeError", "ok"},
		},
	} {
		layers := tc.layers
		if layers == nil {
			layers = restrictedLayers
		}
		for _, layer := range layers {
			t.Run(name+"/"+string(layer), func(t *testing.T) {
				t.Parallel()
				r := startSession(t, newSandbox(t), layer)
				for i, code := range tc.calls {
					out := r.call(code)
					checkExpectation(t, tc.want[i], out)
					switch {
					case strings.Contains(code, "6 * 7") && value(out) != "42":
						t.Errorf("call %d: value %s, want 42\n%s", i+1, value(out), out)
					case strings.Contains(code, "'visible'") && out.Stdout != "visible\n":
						t.Errorf("call %d: stdout %q, want the call's own print\n%s", i+1, out.Stdout, out)
					case strings.Contains(code, "'second'") && out.Stdout != "second\n":
						t.Errorf("call %d: stdout %q\n%s", i+1, out.Stdout, out)
					case (strings.Contains(code, "del a, b") || strings.Contains(code, "del keep")) && !strings.Contains(out.Stderr, "PJ009"):
						// The finalizer ran in this call, with the fence on.
						t.Errorf("call %d: the finalizer's refusal is not in this call's stderr\n%s", i+1, out)
					}
				}
			})
		}
	}
}

// TestEscapeCorpusInOneSession runs the whole escape corpus as the calls
// of one session per restricted layer: every probe must meet the fence
// exactly as it does in a fresh runner, whatever the probes before it did.
func TestEscapeCorpusInOneSession(t *testing.T) {
	requirePython(t)
	probes := loadCorpus(t, escapesDir)
	for _, layer := range restrictedLayers {
		t.Run(string(layer), func(t *testing.T) {
			t.Parallel()
			r := startSession(t, newSandbox(t), layer)
			for _, p := range probes {
				t.Run(p.Name, func(t *testing.T) {
					checkExpectation(t, p.Expect[layer], r.call(p.Code))
				})
			}
			if out := r.call("6 * 7"); value(out) != "42" {
				t.Errorf("after the corpus: value %s, want 42\n%s", value(out), out)
			}
		})
	}
}

// The benchmark of a session call without the kernel: what the runner
// itself costs per call, the pipes on the sync socket included.
func BenchmarkSessionCall(b *testing.B) {
	requirePython(b)
	r := startSession(b, newSandbox(b), policy.LayerCalc)
	r.call("x = 1")
	b.ResetTimer()
	for b.Loop() {
		if out := r.call("print(x)"); out.Stdout != "1\n" {
			b.Fatalf("stdout %q", out.Stdout)
		}
	}
}
