# pyjail runner: a session's calls in one interpreter. See package
# pyrunner for the protocol.
#
# A session child (ForkRequest.session) is a forked child that, once
# ready, serves many calls in one interpreter: the globals, imports and
# /tmp of one call are there for the next. Per call, the supervisor sends
# the call's stdout and stderr pipes on the sync socket (fd 5, SCM_RIGHTS)
# and then an Exec line with the call's seq on fd 3; the child puts the
# pipes on fds 1 and 2, runs the code in the session's globals, collects
# its garbage, flushes, points fds 1 and 2 back at /dev/null (so the
# supervisor sees EOF on both) and answers with a reply of the same seq.
# The supervisor freezes the jail (cgroup freezer) between calls.
#
# Once the first call's code has run, the fence's user phase is on for
# good: the audit hook judges every event, the runner's own included. So
# everything the runner does between calls is prepared before any user
# code, and none of it can be reached or rewired by user code:
#   - it uses only callables captured up front, bound to C code: os.read,
#     os.write, os.dup2, os.close, the sync socket's recvmsg (a bound
#     method: patching the socket class later changes nothing), json's C
#     scanner built over a decoder of its own, gc.collect; no library
#     Python code runs between calls, and none of these raise an audit
#     event (the socket family is refused to everyone, so the socket
#     object itself was made before the user phase);
#   - the descriptors it reads (3, 5) and writes (4), and its /dev/null,
#     are on the fence's list of descriptors no code may open;
#   - the collector is off from the end of a call's code until the next
#     call's code starts, so no __del__ of the user's runs while the runner
#     reads the next call or writes a reply (a call's young garbage is
#     collected, and its finalizers run, before its output is detached);
#     and nothing the runner drops between calls is the user's: the reply
#     holds exact builtin types only;
#   - the reply is built from exact builtin types and serialised by
#     _dumps, which calls no library class.
# The fence itself makes a call's code immune to what earlier calls did to
# the ast classes (fence.compile_user). In layer none there is no fence:
# user code owns the process, fds 3 to 5 included, and the supervisor
# takes a session's replies, like every reply, as claims; it matches each
# to its call by seq, and reads the verdicts of limits from the kernel.
import json
import os
import sys

import checkpoint
import execute
import fence
import wire

FD_SYNC = 5


class _SessionIO:
    """A session's channel between calls: the callables and descriptors
    the runner uses there, captured before any user code ran."""

    __slots__ = ("read", "write", "dup2", "close", "exit", "recvmsg", "scan",
                 "null", "pending", "stdout", "stderr", "collect", "gc_off",
                 "gc_on", "gc_enabled", "gc_was", "ancbuf3")

    def __init__(self, sync):
        import gc
        import socket
        self.read, self.write, self.dup2, self.close, self.exit = os.read, os.write, os.dup2, os.close, os._exit
        self.recvmsg = sync.recvmsg
        self.ancbuf3 = socket.CMSG_SPACE(3 * 4)
        self.scan = json.scanner.make_scanner(json.decoder.JSONDecoder())
        self.collect, self.gc_off, self.gc_on, self.gc_enabled = gc.collect, gc.disable, gc.enable, gc.isenabled
        self.gc_was = True
        self.null = os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)
        self.pending = b""
        self.stdout, self.stderr = sys.stdout, sys.stderr
        # The boot's output pipes: the supervisor reads them to EOF before
        # the first call.
        self._flush()
        self.dup2(self.null, 1)
        self.dup2(self.null, 2)

    def next_call(self):
        """Blocks until the next Exec and returns (seq, code); exits the
        process when the supervisor has closed fd 3 (the session ends)."""
        buf = self.pending
        while b"\n" not in buf:
            chunk = self.read(wire.FD_CONTROL_IN, 1 << 16)
            if not chunk:
                self.exit(0)
            buf += chunk
        line, _, self.pending = buf.partition(b"\n")
        try:
            text = line.decode("utf-8")
            req, end = self.scan(text, 0)
        except (UnicodeDecodeError, ValueError, StopIteration):
            req, end = None, -1
        if type(req) is not dict or end != len(text):
            self._fail("the Exec line is not a JSON object")
        seq, code, op = req.get("seq"), req.get("code"), req.get("op", "")
        if type(seq) is not int or type(code) is not str or type(op) is not str:
            self._fail("the Exec line lacks seq or code")
        return seq, code, op

    def attach_output(self):
        """Takes the call's output pipes from the sync socket onto fds 1
        and 2, and the runner's own stdout and stderr back into sys.
        Returns the checkpoint pipe that came with them (message _BLOB: a
        checkpoint's or a restore's third descriptor), or None."""
        msg, anc, flags, _ = self.recvmsg(16, self.ancbuf3, _MSG_CMSG_CLOEXEC)
        fds = []
        for level, kind, data in anc:
            if level == _SOL_SOCKET and kind == _SCM_RIGHTS:
                for i in range(0, len(data) - len(data) % 4, 4):
                    fds.append(int.from_bytes(data[i:i + 4], _BYTEORDER))
        blob = None
        if msg == _BLOB and len(fds) == 3 and not flags & _MSG_CTRUNC:
            blob = fds.pop()
        elif msg != _PIPES or len(fds) != 2 or flags & _MSG_CTRUNC:
            self._fail("expected the call's two output pipes on the sync socket")
        self.dup2(fds[0], 1)
        self.dup2(fds[1], 2)
        self.close(fds[0])
        self.close(fds[1])
        # An earlier call may have left sys.stdout redirected (a suspended
        # generator inside contextlib.redirect_stdout): each call's output
        # goes to its own pipes.
        if self.stdout.closed or self.stderr.closed:
            self.stdout = open(1, "w", closefd=False, encoding="utf-8", errors="backslashreplace")
            self.stderr = open(2, "w", closefd=False, encoding="utf-8", errors="backslashreplace")
        sys.stdout, sys.stderr = self.stdout, self.stderr
        return blob

    def run_user(self):
        """Right before user code: the collector as the user left it."""
        if self.gc_was:
            self.gc_on()

    def detach_output(self):
        """Ends a call's output: its young garbage collected (finalizers
        are user code, and run now, still inside the call, their output
        in its pipes), the collector off until the next call's code, the
        output flushed and fds 1 and 2 back on /dev/null, which closes the
        call's pipes. Older garbage waits for a collection in a later call:
        a full collection would walk every object the session holds, at
        every call."""
        try:
            self.collect(1)
        except BaseException:
            pass  # a finalizer that raised; it ran in this call
        self.gc_was = self.gc_enabled()
        self.gc_off()
        self._flush()
        self.dup2(self.null, 1)
        self.dup2(self.null, 2)

    def send_reply(self, seq, reply):
        data = (wire.dumps({"type": "reply", "seq": seq, "reply": reply}) + "\n").encode("utf-8")
        while data:
            data = data[self.write(wire.FD_CONTROL_OUT, data):]

    def _flush(self):
        for f in (self.stdout, self.stderr):
            try:
                f.flush()
            except BaseException:
                pass

    def _fail(self, why):
        self.write(wire.FD_CONTROL_OUT, (wire.dumps({"type": "reply", "seq": -1, "reply": {
            "status": "internal", "message": "session: " + why, "exit_code": 125}}) + "\n").encode("utf-8"))
        self.exit(125)


# What _SessionIO compares against, captured before any user code.
_SOL_SOCKET, _SCM_RIGHTS = 1, 1
_MSG_CMSG_CLOEXEC, _MSG_CTRUNC = 0x40000000, 0x8
_BYTEORDER = sys.byteorder
_PIPES = b"o"
_BLOB = b"b"


def serve(sync, boot, prepared, err):
    """Serves a session's calls, each on the sync socket's pipes, until
    the supervisor closes fd 3: the process exits then, or when the
    supervisor kills it. See the module comment for what holds between
    calls."""
    # What a call may need of the standard library, imported while no
    # user code has run yet (an import later is judged by the hook, and
    # finds whatever user code did to the import path's libraries).
    import base64  # noqa: F401 (figures)
    import io as _io  # noqa: F401
    import linecache  # noqa: F401
    import traceback  # noqa: F401
    import types  # noqa: F401
    io = _SessionIO(sync)
    fence.protect_fds((FD_SYNC, io.null))
    g = None
    initial = None
    n = 0
    while True:
        seq, code, op = io.next_call()
        n += 1
        blob = io.attach_output()
        if err is not None:
            reply = {"status": "internal", "message": err, "exit_code": 1}
        elif op and (op not in ("checkpoint", "restore") or blob is None):
            reply = {"status": "internal", "message": "session: op %r without its pipe" % op[:20], "exit_code": 125}
        else:
            try:
                if g is None:
                    g = execute.user_globals(prepared)
                    # What the session had before any user code: not the
                    # user's, and never saved.
                    initial = dict(g)
                if op:
                    # A checkpoint or restore runs as a call: the user's
                    # __reduce__ and __setstate__ are user code.
                    execute.arm(prepared)
                    io.run_user()
                    if op == "checkpoint":
                        reply = checkpoint.save(g, initial, blob)
                    else:
                        reply = checkpoint.restore(g, blob)
                        # Restored functions keep the filenames of the
                        # calls that defined them ("<code 3>"): this
                        # session's next calls are numbered above those,
                        # so that no call of its own takes one's name.
                        n = max(n, checkpoint.restored_calls())
                else:
                    rejected, body, tail = execute.check_code(code, fence.user_file(n))
                    if rejected is not None:
                        reply = rejected
                    else:
                        execute.register_source(code, fence.user_file(n))
                        execute.arm(prepared)
                        io.run_user()
                        reply = execute.execute(body, tail, g, boot)
            except BaseException as e:
                reply = {"status": "internal", "exception": execute.type_name(e),
                         "message": "".join(("runner: ", str(e)))[:1000], "exit_code": 1}
        if blob is not None:
            io.close(blob)
        io.detach_output()
        io.send_reply(seq, reply)

