package pyrunner

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pyjail/pyjail/policy"
)

// requireDill skips without dill in the host interpreter (Debian's
// python3-dill, which scripts/setup.sh installs), unless CI demands the
// test run.
func requireDill(tb testing.TB, modules ...string) {
	tb.Helper()
	requirePython(tb)
	imports := strings.Join(append([]string{"dill"}, modules...), ", ")
	if out, err := exec.Command(hostPython, "-c", "import "+imports).CombinedOutput(); err != nil {
		if os.Getenv("PYJAIL_TEST_MUST_RUN") == "1" {
			tb.Fatalf("PYJAIL_TEST_MUST_RUN=1 but %s cannot import %s: %s", hostPython, imports, out)
		}
		tb.Skipf("%s cannot import %s (install python3-dill): %s", hostPython, imports, out)
	}
}

// checkpointLayers are the layers a checkpoint runs in: the fence's and
// none, where it must still work.
var checkpointLayers = []policy.PythonLayer{policy.LayerCalc, policy.LayerWorkspace, policy.LayerNone}

func notRestored(out runOutput, name string) (string, bool) {
	if out.Reply.Checkpoint == nil {
		return "", false
	}
	for _, nr := range out.Reply.Checkpoint.NotRestored {
		if nr.Name == name {
			return nr.Reason, true
		}
	}
	return "", false
}

func mustOK(tb testing.TB, what string, out runOutput) {
	tb.Helper()
	if out.Reply.Status != StatusOK {
		tb.Fatalf("%s: status %q\n%s", what, out.Reply.Status, out)
	}
}

// roundTripSetup is a session's state of every kind the round trip
// covers; roundTripCheck reads it back in another session.
const roundTripSetup = `import math as m
import io
sio = io.StringIO("abc")
sio.read(1)
n = 42
s = "h\u00e9llo"
lst = [1, 2, 3]
alias = lst
d = {"k": lst, "t": (1, 2.5, None, True, b"by", 3 + 4j), "set": {1, 2}, "fs": frozenset("ab")}
def f(x, y=2):
    return x * y + n
lam = lambda z: z + 1
class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y
    def norm(self):
        return m.hypot(self.x, self.y)
class Point3(Point):
    def __init__(self, x, y, z):
        super().__init__(x, y)
        self.z = z
    def norm(self):
        return m.hypot(super().norm(), self.z)
p = Point(3, 4)
p3 = Point3(3, 4, 12)
def counter():
    c = 0
    def inc():
        nonlocal c
        c += 1
        return c
    return inc
inc = counter()
inc()
def fact(k):
    return 1 if k <= 1 else k * fact(k - 1)
def walk(k):
    def down(i):
        return 0 if i == 0 else 1 + down(i - 1)
    return down(k)
bound = p.norm
nothing = None
dots = ...
rng = range(2, 10, 3)
sl = slice(1, None, 2)
`

const roundTripCheck = `lst.append(4)
print(alias is lst, alias, d["k"] is lst, d["t"], sorted(d["set"]), sorted(d["fs"]))
print(f(3), f(3, 3), lam(1), p.norm(), p3.norm(), isinstance(p3, Point), type(p).__name__)
print(inc(), fact(5), walk(3), bound(), m.sqrt(16), s, n, nothing, dots, list(rng), lst[sl])
n = 100
print(f(3), sio.read())
`

const roundTripWant = "True [1, 2, 3, 4] True (1, 2.5, None, True, b'by', (3+4j)) [1, 2] ['a', 'b']\n" +
	"48 51 2 5.0 13.0 True Point\n" +
	"2 120 3 5.0 4.0 h\u00e9llo 42 None Ellipsis [2, 5, 8] [2, 4]\n" +
	"106 bc\n"

// TestCheckpointRoundTrip: a session's state comes back in a fresh
// session as it was, twice over (a restored session checkpoints again),
// and the checkpoint reply describes what was written.
func TestCheckpointRoundTrip(t *testing.T) {
	requireDill(t)
	for _, layer := range checkpointLayers {
		t.Run(string(layer), func(t *testing.T) {
			t.Parallel()
			a := startSession(t, newSandbox(t), layer)
			mustOK(t, "setup", a.call(roundTripSetup))
			blob, out := a.checkpoint()
			mustOK(t, "checkpoint", out)
			cp := out.Reply.Checkpoint
			if cp == nil {
				t.Fatalf("checkpoint reply without checkpoint\n%s", out)
			}
			if got, want := cp.Bytes, int64(len(blob)); got != want {
				t.Errorf("reply bytes %d, want the %d bytes written", got, want)
			}
			if !regexp.MustCompile(`^3\.\d+$`).MatchString(cp.Python) {
				t.Errorf("python %q, want 3.x", cp.Python)
			}
			if len(cp.Skipped) != 0 {
				t.Errorf("skipped %+v, want none", cp.Skipped)
			}
			var names []string
			var sum int64
			for _, sn := range cp.Saved {
				names = append(names, sn.Name)
				sum += sn.Bytes
				wantKind := "value"
				if sn.Name == "m" || sn.Name == "io" {
					wantKind = "module"
				}
				if sn.Kind != wantKind || sn.Bytes <= 0 {
					t.Errorf("saved %+v, want kind %s and its bytes", sn, wantKind)
				}
			}
			want := []string{"m", "io", "sio", "n", "s", "lst", "alias", "d", "f", "lam", "Point", "Point3", "p", "p3",
				"counter", "inc", "fact", "walk", "bound", "nothing", "dots", "rng", "sl"}
			if !slices.Equal(names, want) {
				t.Errorf("saved %v, want %v", names, want)
			}
			if sum >= int64(len(blob)) {
				t.Errorf("names' bytes %d, want less than the stream's %d (its header and end)", sum, len(blob))
			}

			b := startSession(t, newSandbox(t), layer)
			out = b.restore(blob)
			mustOK(t, "restore", out)
			if got := out.Reply.Checkpoint; got == nil || !slices.Equal(got.Restored, want) || len(got.NotRestored) != 0 {
				t.Fatalf("restore: want every name back\n%s", out)
			}
			if out := b.call(roundTripCheck); out.Reply.Status != StatusOK || out.Stdout != roundTripWant {
				t.Errorf("after restore: stdout %q, want %q\n%s", out.Stdout, roundTripWant, out)
			}
			// A restored function's lines are in its tracebacks.
			if out := b.call("f('a', 'b')"); out.Reply.Exception != "TypeError" || !strings.Contains(out.Stderr, "return x * y + n") {
				t.Errorf("a restored function's traceback lacks its source line\n%s", out)
			}
			// The restored session makes a function of its own and is saved
			// again: both kinds of functions come back.
			mustOK(t, "second setup", b.call("def g2(v):\n    return f(v) - 1"))
			blob2, out := b.checkpoint()
			mustOK(t, "second checkpoint", out)
			if len(out.Reply.Checkpoint.Skipped) != 0 {
				t.Errorf("second checkpoint skipped %+v", out.Reply.Checkpoint.Skipped)
			}
			c := startSession(t, newSandbox(t), layer)
			out = c.restore(blob2)
			mustOK(t, "second restore", out)
			if len(out.Reply.Checkpoint.NotRestored) != 0 {
				t.Errorf("second restore lost %+v", out.Reply.Checkpoint.NotRestored)
			}
			if out := c.call("print(g2(1), f(1), inc(), walk(2))"); out.Stdout != "101 102 3 2\n" {
				t.Errorf("after the second restore: stdout %q, want %q\n%s", out.Stdout, "101 102 3 2\n", out)
			}
		})
	}
}

// TestCheckpointDataFrame: a 100,000-row DataFrame and a numpy array come
// back equal.
func TestCheckpointDataFrame(t *testing.T) {
	requireDill(t, "numpy", "pandas")
	for _, layer := range []policy.PythonLayer{policy.LayerCalc, policy.LayerNone} {
		t.Run(string(layer), func(t *testing.T) {
			t.Parallel()
			a := startSession(t, newSandbox(t), layer)
			mustOK(t, "setup", a.call(dataFrameSetup))
			blob, out := a.checkpoint()
			mustOK(t, "checkpoint", out)
			if len(out.Reply.Checkpoint.Saved) != 4 || len(out.Reply.Checkpoint.Skipped) != 0 {
				t.Fatalf("checkpoint: want np, pd, df and arr saved\n%s", out)
			}
			b := startSession(t, newSandbox(t), layer)
			out = b.restore(blob)
			mustOK(t, "restore", out)
			if len(out.Reply.Checkpoint.NotRestored) != 0 {
				t.Fatalf("restore lost names\n%s", out)
			}
			check := `print(df.shape, int(df["a"].sum()), float(df["b"].sum()), df["c"].iloc[8], str(df["d"].dtype), arr.shape, float(arr[9, 99]), arr.dtype)`
			want := "(100000, 4) 4999950000 2499975000.0 x1 category (10, 100) 1.0 float64\n"
			if out := b.call(check); out.Stdout != want {
				t.Errorf("after restore: stdout %q, want %q\n%s", out.Stdout, want, out)
			}
		})
	}
}

const dataFrameSetup = `import numpy as np, pandas as pd
df = pd.DataFrame({"a": np.arange(100000), "b": np.arange(100000) * 0.5,
                   "c": ["x%d" % (i % 7) for i in range(100000)]})
df["d"] = df["c"].astype("category")
arr = np.linspace(0, 1, 1000).reshape(10, 100)
`

// TestCheckpointSkips: what cannot be saved is named with why, and the
// rest is saved and comes back.
func TestCheckpointSkips(t *testing.T) {
	requireDill(t)
	for _, layer := range checkpointLayers {
		t.Run(string(layer), func(t *testing.T) {
			t.Parallel()
			code := "import math\nimport queue\nok = 1\ngen = (i for i in range(3))\nlk = queue.Queue().mutex\nq = queue.Queue()\n" +
				"class Bad:\n    def __reduce__(self):\n        raise ValueError('no')\nbad = Bad()\n"
			want := map[string]string{"gen": "a generator", "lk": "a lock", "q": "cannot be saved (PicklingError: it holds a lock)", "bad": "cannot be saved (ValueError: no)"}
			check, checkWant := "print(ok, math.floor(2.5), queue.Queue().qsize(), Bad.__name__)", "1 2 0 Bad\n"
			switch layer {
			case policy.LayerCalc:
				// A scope module under another name is saved by its name.
				code += "alias = np\n"
				check, checkWant = check+"\nprint(alias.sqrt(4.0))", checkWant+"2.0\n"
			case policy.LayerWorkspace:
				code += "fh = open('data.csv')\n"
				want["fh"] = "an open file"
			case policy.LayerNone:
				code += "import socket\nsk = socket.socket()\nfh = open('data.csv')\nfiles = {'f': fh}\n"
				want["sk"] = "a socket"
				want["fh"] = "an open file"
				want["files"] = "cannot be saved (PicklingError: it holds an open file)"
			}
			a := startSession(t, newSandbox(t), layer)
			mustOK(t, "setup", a.call(code))
			blob, out := a.checkpoint()
			mustOK(t, "checkpoint", out)
			got := map[string]string{}
			for _, sk := range out.Reply.Checkpoint.Skipped {
				got[sk.Name] = sk.Reason
			}
			for name, reason := range want {
				if !strings.HasPrefix(got[name], reason) {
					t.Errorf("skipped %s: %q, want %q", name, got[name], reason)
				}
			}
			if len(got) != len(want) {
				t.Errorf("skipped %v, want only %v", got, want)
			}
			var saved []string
			for _, sn := range out.Reply.Checkpoint.Saved {
				saved = append(saved, sn.Name)
			}
			wantSaved := []string{"math", "queue", "ok", "Bad"}
			switch layer {
			case policy.LayerCalc:
				wantSaved = append(wantSaved, "alias")
			case policy.LayerNone:
				wantSaved = append(wantSaved, "socket")
			}
			if !slices.Equal(saved, wantSaved) {
				t.Errorf("saved %v, want %v", saved, wantSaved)
			}
			b := startSession(t, newSandbox(t), layer)
			out = b.restore(blob)
			mustOK(t, "restore", out)
			if len(out.Reply.Checkpoint.NotRestored) != 0 {
				t.Errorf("restore lost %+v", out.Reply.Checkpoint.NotRestored)
			}
			if out := b.call(check); out.Stdout != checkWant {
				t.Errorf("after restore: stdout %q\n%s", out.Stdout, out)
			}
		})
	}
}

// TestCheckpointAfterUserPatches: a session whose user shadowed the
// builtins, or whose objects misbehave when pickled, still checkpoints
// and restores; only the user's own names change.
func TestCheckpointAfterUserPatches(t *testing.T) {
	requireDill(t)
	for _, layer := range checkpointLayers {
		t.Run(string(layer), func(t *testing.T) {
			t.Parallel()
			a := startSession(t, newSandbox(t), layer)
			mustOK(t, "setup", a.call(`victim = 1
class Eraser:
    def __reduce__(self):
        global victim
        del victim
        return (int, (7,))
eraser = Eraser()
class Liar:
    def __reduce_ex__(self, proto):
        return "not a reduce value"
liar = Liar()
_print = print
class Loud:
    def __reduce__(self):
        return (_print, ("loud at load",))
loud = Loud()
print = None
len = lambda x: -1
isinstance = None
type = 5
getattr = None
repr = None
str = None
object = None
`))
			blob, out := a.checkpoint()
			mustOK(t, "checkpoint", out)
			if _, ok := notSkipped(out, "liar"); ok {
				t.Errorf("liar was saved\n%s", out)
			}
			b := startSession(t, newSandbox(t), layer)
			out = b.restore(blob)
			mustOK(t, "restore", out)
			if out.Stdout != "loud at load\n" {
				t.Errorf("restore stdout %q, want the user's own print", out.Stdout)
			}
			if out := b.call("x = [len([1, 2]), type, eraser, print is None]\ndel print, len, type, getattr, repr, str, object, isinstance\nprint(x, len('ab'))"); out.Stdout != "[-1, 5, 7, True] 2\n" {
				t.Errorf("after restore: stdout %q\n%s", out.Stdout, out)
			}
			if out := b.call("6 * 7"); value(out) != "42" {
				t.Errorf("value %s, want 42\n%s", value(out), out)
			}
		})
	}
}

// notSkipped reports whether name is among a checkpoint's saved names.
func notSkipped(out runOutput, name string) (int64, bool) {
	if out.Reply.Checkpoint == nil {
		return 0, false
	}
	for _, sn := range out.Reply.Checkpoint.Saved {
		if sn.Name == name {
			return sn.Bytes, true
		}
	}
	return 0, false
}

// pk writes a pickle (protocol 5) opcode by opcode, for blobs the runner
// did not make.
type pk struct{ b bytes.Buffer }

func newPk() *pk {
	p := &pk{}
	p.b.WriteString("\x80\x05") // PROTO 5
	return p
}

func (p *pk) str(s string) *pk {
	p.b.WriteByte('X') // BINUNICODE
	_ = binary.Write(&p.b, binary.LittleEndian, uint32(len(s)))
	p.b.WriteString(s)
	return p
}

func (p *pk) bytes(s string) *pk {
	p.b.WriteByte('B') // BINBYTES
	_ = binary.Write(&p.b, binary.LittleEndian, uint32(len(s)))
	p.b.WriteString(s)
	return p
}

func (p *pk) int(i int32) *pk {
	p.b.WriteByte('J') // BININT
	_ = binary.Write(&p.b, binary.LittleEndian, i)
	return p
}

// global pushes module.name (STACK_GLOBAL).
func (p *pk) global(module, name string) *pk { return p.str(module).str(name).op(0x93) }

// tuple makes a tuple of the top n items (n <= 3) or, with n < 0, of
// everything above the last mark.
func (p *pk) tuple(n int) *pk {
	switch n {
	case 0:
		return p.op(')')
	case 1:
		return p.op(0x85)
	case 2:
		return p.op(0x86)
	case 3:
		return p.op(0x87)
	}
	return p.op('t')
}

func (p *pk) op(b ...byte) *pk { p.b.Write(b); return p }
func (p *pk) mark() *pk        { return p.op('(') }
func (p *pk) reduce() *pk      { return p.op('R') }
func (p *pk) persid() *pk      { return p.op('Q') } // BINPERSID: the pid is on the stack
func (p *pk) put(i byte) *pk   { return p.op('q', i) }
func (p *pk) get(i byte) *pk   { return p.op('h', i) }
func (p *pk) done() []byte     { p.b.WriteByte('.'); return p.b.Bytes() }

// framed is the pickle with everything after PROTO in one FRAME, as the
// runner's pickler writes them: the unpickler reads a frame whole.
func (p *pk) framed() []byte {
	b := p.done()
	var out bytes.Buffer
	out.Write(b[:2])
	out.WriteByte(0x95)
	_ = binary.Write(&out, binary.LittleEndian, uint64(len(b)-2))
	out.Write(b[2:])
	return out.Bytes()
}

// apply lets a helper write part of a pickle in a chain.
func (p *pk) apply(f func(*pk) *pk) *pk { return f(p) }

// ckRecord is one record of a checkpoint stream (checkpoint.py): kind,
// name, the memo range it defines, body.
func ckRecord(kind byte, name string, lo, hi uint32, body []byte) []byte {
	var b bytes.Buffer
	b.WriteByte(kind)
	_ = binary.Write(&b, binary.BigEndian, uint16(len(name)))
	b.WriteString(name)
	_ = binary.Write(&b, binary.BigEndian, [3]uint32{lo, hi, uint32(len(body))})
	b.Write(body)
	return b.Bytes()
}

// ckStream is a checkpoint of the records under header, ended.
func ckStream(header []byte, records ...[]byte) []byte {
	out := slices.Clone(header)
	for _, r := range records {
		out = append(out, r...)
	}
	return append(out, ckRecord('e', "", uint32(len(records)), 0, nil)...)
}

// headerOf is the header line of a checkpoint.
func headerOf(tb testing.TB, blob []byte) []byte {
	tb.Helper()
	i := bytes.IndexByte(blob, '\n')
	if i < 0 || !bytes.HasPrefix(blob, []byte("pyjail-checkpoint ")) {
		tb.Fatalf("no checkpoint header in %q", blob[:min(len(blob), 80)])
	}
	return blob[:i+1]
}

// codePid pushes a session call's code as checkpoint.py saves it: the
// persistent id ("code", filename, source, path), path 0 (the call's
// body) and then indexes into co_consts.
func (p *pk) codePid(source string, path ...int32) *pk {
	p.mark().str("code").str("<code 1>").str(source).mark()
	for _, i := range path {
		p.int(i)
	}
	return p.tuple(-1).tuple(-1).persid()
}

// function pushes the function source defines first, made as the runner
// makes a session's functions: the "function" constructor, the code by
// codePid, the session's globals by their token.
func (p *pk) function(source string) *pk {
	p.str("function").persid().mark().codePid(source, 0, 0).str("globals").persid().str("f")
	return p.op('N', 'N', 'N', '}').tuple(-1).reduce()
}

// TestRestoreRefusesCraftedPickles: a checkpoint is loaded under the
// fence of user code, whoever made its bytes (the user's own __reduce__
// chooses what a record says). Each blob below reaches for something user
// code may not have; each must come back as a name not restored with the
// fence's reason, run nothing (the marker file stays absent), and leave
// the session usable and as guarded as before.
func TestRestoreRefusesCraftedPickles(t *testing.T) {
	requireDill(t, "numpy")
	marker := filepath.Join(t.TempDir(), "marker")
	touch := "touch " + marker
	codeArgs := func(p *pk) *pk { // CodeType's arguments for "return None"
		p.mark().int(0).int(0).int(0).int(0).int(1).int(0).bytes("\x97\x00d\x00S\x00").op('N').tuple(1).op(')', ')')
		return p.str("x").str("x").str("x").int(1).bytes("").bytes("").op(')', ')').tuple(-1)
	}
	cases := []struct {
		name string
		body []byte
		// why is part of the reason the restore must give; "" for a
		// blob that comes back as a harmless value instead.
		why string
	}{
		{"os.system", newPk().global("os", "system").str(touch).tuple(1).reduce().done(), "module os is denied"},
		{"posix.system", newPk().global("posix", "system").str(touch).tuple(1).reduce().done(), "module posix is denied"},
		{"subprocess.Popen", newPk().global("subprocess", "Popen").op(']').str("touch").op('a').str(marker).op('a').tuple(1).reduce().done(), "module subprocess is denied"},
		{"builtins.eval", newPk().global("builtins", "eval").str("__import__('os').system('" + touch + "')").tuple(1).reduce().done(), "builtins.eval is not available"},
		{"builtins.__import__", newPk().global("builtins", "__import__").str("os").tuple(1).reduce().done(), "builtins.__import__ is not available"},
		{"builtins.__pj_attr__", newPk().global("builtins", "__pj_attr__").global("builtins", "object").str("__subclasses__").tuple(2).reduce().op(')').reduce().done(), "builtins.__pj_attr__ is not available"},
		{"module attribute os", newPk().global("numpy.lib.npyio", "os.mkfifo").str(marker).tuple(1).reduce().done(), "reaches a module"},
		{"module attribute inspect", newPk().global("numpy.ma.core", "inspect.getsource").done(), "PJ003"},
		{"numpy.load", newPk().global("numpy", "load").str("/etc/passwd").tuple(1).reduce().done(), "reads or writes files"},
		{"numpy private fromfile", newPk().global("numpy.core._multiarray_umath", "fromfile").str("/etc/passwd").tuple(1).reduce().done(), "reads or writes files"},
		{"private module", newPk().global("_posixsubprocess", "fork_exec").done(), "private modules are not for user code"},
		{"private twin", newPk().global("_pickle", "loads").done(), "module pickle is denied"},
		{"copyreg", newPk().global("copyreg", "_reconstructor").done(), "module copyreg is denied"},
		{"open outside", newPk().global("builtins", "open").str("/etc/passwd").tuple(1).reduce().done(), "refused"},
		{"io.open outside", newPk().global("io", "open").str("/etc/passwd").tuple(1).reduce().done(), "refused"},
		// dill's constructors that import, eval or make code.
		{"dill namedtuple import", newPk().global("dill._dill", "_create_namedtuple").str("mkfifo").str("a").tuple(1).str("posix").tuple(3).reduce().
			str(marker).tuple(1).reduce().done(), ""}, // a namedtuple class of that name, importing nothing
		{"dill load_type CodeType", newPk().global("dill._dill", "_load_type").str("CodeType").tuple(1).reduce().done(), "not available to user code"},
		{"dill load_type FunctionType", newPk().global("dill._dill", "_load_type").str("FunctionType").tuple(1).reduce().done(), "not available to user code"},
		{"dill load_type AttrGetterType", newPk().global("dill._dill", "_load_type").str("AttrGetterType").tuple(1).reduce().done(), "not available to user code"},
		{"dill create_code", newPk().global("dill._dill", "_create_code").done(), "not for checkpoints"},
		{"dill create_function", newPk().global("dill._dill", "_create_function").done(), "not for checkpoints"},
		{"dill eval_repr", newPk().global("dill._dill", "_eval_repr").str("__import__('os').mkfifo('" + marker + "')").tuple(1).reduce().done(), "not for checkpoints"},
		{"dill import_module", newPk().global("dill._dill", "_import_module").str("os").tuple(1).reduce().done(), "PJ003"},
		{"dill module", newPk().global("dill", "_dill").done(), "module dill is denied"},
		// getattr tricks and the session's own objects.
		{"getattr __self__", newPk().global("builtins", "getattr").global("builtins", "print").str("__self__").tuple(2).reduce().done(), "PJ002"},
		{"getattr __globals__", newPk().global("dill._dill", "_get_attr").function("def f():\n    return 1\n").str("__globals__").tuple(2).reduce().done(), "PJ002"},
		{"getattr __builtins__", newPk().global("builtins", "getattr").function("def f():\n    return 1\n").str("__builtins__").tuple(2).reduce().done(), "PJ002"},
		{"persistent builtins", newPk().str("builtins").persid().done(), "unknown persistent reference"},
		{"globals cleared", newPk().global("builtins", "getattr").global("builtins", "dict").str("clear").tuple(2).reduce().
			str("globals").persid().tuple(1).reduce().done(), "not restored (TypeError"},
		// Code objects: only from checked source, never made by the pickle.
		{"code from unchecked source", newPk().codePid("def f():\n    return ().__class__\n", 0, 0).done(), "fails the check"},
		{"code of no call", newPk().mark().str("code").str("/usr/lib/python3/x.py").str("def f():\n    pass\n").int(0).int(0).tuple(2).tuple(-1).persid().done(), "only from the session's calls"},
		{"code made by type", newPk().global("builtins", "type").codePid("def f():\n    return 1\n", 0, 0).tuple(1).reduce().op().
			apply(codeArgs).reduce().done(), "PJ011"},
		{"function made by type", newPk().global("builtins", "type").function("def f(n):\n    return getattr(len, n)\n").tuple(1).reduce().
			codePid("def f(n):\n    return getattr(len, n)\n", 0, 0).op('}').tuple(2).reduce().done(), "PJ011"},
		{"setattr __code__", newPk().global("builtins", "setattr").function("def f():\n    return 1\n").str("__code__").
			codePid("def f():\n    return 2\n", 0, 0).tuple(3).reduce().done(), "PJ002"},
		{"function of other globals", newPk().str("function").persid().mark().codePid("def f():\n    return 1\n", 0, 0).op('}').str("f").
			op('N', 'N', 'N', '}').tuple(-1).reduce().done(), "other globals"},
	}
	for _, layer := range []policy.PythonLayer{policy.LayerCalc, policy.LayerWorkspace} {
		t.Run(string(layer), func(t *testing.T) {
			r := startSession(t, newSandbox(t), layer)
			blob, out := r.checkpoint()
			mustOK(t, "checkpoint of a fresh session", out)
			head := headerOf(t, blob)
			for _, tc := range cases {
				out := r.restore(ckStream(head, ckRecord('v', "evil", 0, 0, tc.body)))
				why, refused := notRestored(out, "evil")
				switch {
				case out.Reply.Status != StatusOK:
					t.Errorf("%s: status %q, want ok with evil not restored\n%s", tc.name, out.Reply.Status, out)
				case tc.why == "" && refused:
					t.Errorf("%s: refused (%s), want a harmless value\n%s", tc.name, why, out)
				case tc.why != "" && (!refused || !strings.Contains(why, tc.why)):
					t.Errorf("%s: evil not refused with %q\n%s", tc.name, tc.why, out)
				}
				if _, err := os.Lstat(marker); err == nil {
					t.Fatalf("%s: the marker file exists: the pickle ran code\n%s", tc.name, out)
				}
				want := map[bool]string{true: "42 True\n", false: "42 False\n"}[tc.why == ""]
				if out := r.call("print(6 * 7, 'evil' in dir())\nevil = None\ndel evil"); out.Stdout != want {
					t.Errorf("%s: the session after the restore: %q\n%s", tc.name, out.Stdout, out)
				}
			}
			// Records the runner never writes.
			for name, rec := range map[string][]byte{
				"__builtins__": ckRecord('v', "__builtins__", 0, 0, newPk().op('}').done()),
				"kind x":       ckRecord('x', "evil", 0, 0, nil),
				"module os":    ckRecord('m', "evil", 0, 0, []byte("os")),
			} {
				out := r.restore(ckStream(head, rec))
				if out.Reply.Status != StatusOK || out.Reply.Checkpoint == nil || len(out.Reply.Checkpoint.NotRestored) != 1 ||
					!strings.Contains(out.Reply.Checkpoint.NotRestored[0].Reason, "refused by the fence") {
					t.Errorf("record %s: want it refused\n%s", name, out)
				}
			}
			// Still the guarded builtins, and still the fence.
			checkExpectation(t, "error AttributeError PJ002", r.call("k = '__sel' + 'f__'\ngetattr(len, k)"))
			checkExpectation(t, "rejected PJ001", r.call("eval('1')"))
		})
	}
}

// TestRestoreRejectsBadStreams: bytes that are not a checkpoint of this
// runner are refused whole with a status of their own; a stream cut
// short restores what it holds; the session stays usable.
func TestRestoreRejectsBadStreams(t *testing.T) {
	requireDill(t)
	r := startSession(t, newSandbox(t), policy.LayerCalc)
	mustOK(t, "setup", r.call("a = 1\nb = [a, 2]\nc = 'x' * 1000"))
	blob, out := r.checkpoint()
	mustOK(t, "checkpoint", out)
	head := headerOf(t, blob)
	f := strings.Fields(string(head))
	other := func(i int, v string) []byte {
		g := slices.Clone(f)
		g[i] = v
		return []byte(strings.Join(g, " ") + "\n")
	}
	fresh := startSession(t, newSandbox(t), policy.LayerCalc)
	empty, out := fresh.checkpoint()
	mustOK(t, "checkpoint of a fresh session", out)
	cutAt := bytes.Index(blob, []byte("x"+strings.Repeat("x", 100)))
	for name, tc := range map[string]struct {
		blob     []byte
		status   string
		why      string
		restored []string
	}{
		"other format":     {append(other(1, "999"), blob[len(head):]...), StatusIncompatible, "format 999", nil},
		"other python":     {append(other(3, "2.7"), blob[len(head):]...), StatusIncompatible, "Python 2.7", nil},
		"garbage":          {[]byte("\x80\x05garbage\n\x00\xff"), StatusCorrupt, "header", nil},
		"empty":            {nil, StatusCorrupt, "empty", nil},
		"malformed header": {[]byte("pyjail-checkpoint two\n"), StatusCorrupt, "malformed", nil},
		"cut short":        {blob[:cutAt], StatusOK, "ends early", []string{"a", "b"}},
		"no names":         {empty, StatusOK, "", nil},
		// A name that fails in the middle of its frame: the unpickler
		// must not read the next name from what is left of it.
		"failed mid-frame": {ckStream(head, ckRecord('v', "bad", 0, 1, newPk().op(']').put(0).global("os", "system").str("true").tuple(1).reduce().op('a').framed()),
			ckRecord('v', "good", 1, 1, newPk().mark().int(7).str("seven").tuple(-1).framed()),
			// It shares the failed name's list: it fails too.
			ckRecord('v', "dependent", 1, 1, newPk().get(0).framed())), StatusOK, "", []string{"good"}},
	} {
		out := r.restore(tc.blob)
		if out.Reply.Status != tc.status {
			t.Errorf("%s: status %q, want %q\n%s", name, out.Reply.Status, tc.status, out)
			continue
		}
		if tc.status != StatusOK {
			if !strings.Contains(out.Reply.Message, tc.why) {
				t.Errorf("%s: message %q, want it to say %q", name, out.Reply.Message, tc.why)
			}
		} else if cp := out.Reply.Checkpoint; cp == nil || !slices.Equal(cp.Restored, tc.restored) ||
			(tc.why != "" && (len(cp.NotRestored) == 0 || !strings.Contains(cp.NotRestored[len(cp.NotRestored)-1].Reason, tc.why))) ||
			(tc.why == "" && len(cp.NotRestored) > 0 && name != "failed mid-frame") {
			t.Errorf("%s: want %v restored and %q\n%s", name, tc.restored, tc.why, out)
		}
		if out := r.call("6 * 7"); value(out) != "42" {
			t.Errorf("%s: the session after the restore: %s", name, out)
		}
	}
}
