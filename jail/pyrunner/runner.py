# pyjail runner: pid 1 of a jail. See package pyrunner for the protocol.
import ast
import ctypes
import json
import os
import sys
import traceback

PR_SET_PDEATHSIG = 1
SIGKILL = 9


def _die_with_parent():
    # runc's ParentDeathSignal does not reach the container's pid 1, so the
    # runner arms it itself: if the supervisor dies, the jail dies.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)
    if os.getppid() == 0:
        # The supervisor is outside our pid namespace; getppid is 0 there,
        # so the race "parent died before prctl" cannot be detected here.
        pass


def _read_msg(f):
    line = f.readline()
    if not line:
        raise EOFError("control channel closed")
    return json.loads(line)


def _send(out, msg):
    out.write(json.dumps(msg) + "\n")
    out.flush()


def _run(code, boot):
    reply = {"status": "ok", "exit_code": 0}
    try:
        tree = ast.parse(code, "<code>", "exec")
    except SyntaxError as e:
        traceback.print_exception(type(e), e, None)
        reply.update(status="error", exception="SyntaxError", message=str(e), exit_code=1)
        return reply
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    g = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        exec(compile(tree, "<code>", "exec"), g)
        if last is not None:
            v = eval(compile(last, "<code>", "eval"), g)
            if v is not None:
                r = repr(v)
                cap = boot.get("value_bytes") or 65536
                if len(r) > cap:
                    reply["value_truncated"] = True
                    r = r[:cap]
                reply["value"] = r
    except SystemExit as e:
        code_ = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if code_ != 0:
            reply.update(status="error", exception="SystemExit", exit_code=code_)
    except MemoryError:
        reply.update(status="memory_error", exception="MemoryError", exit_code=1)
        sys.stderr.write("MemoryError\n")
    except BaseException as e:
        tb = e.__traceback__
        # Hide the runner's own frames: start at the user's code.
        while tb is not None and tb.tb_frame.f_code.co_filename != "<code>":
            tb = tb.tb_next
        traceback.print_exception(type(e), e, tb)
        reply.update(status="error", exception=type(e).__name__, message=str(e)[:1000], exit_code=1)
    return reply


def main():
    _die_with_parent()
    cin = os.fdopen(3, "r")
    cout = os.fdopen(4, "w")
    boot = _read_msg(cin)
    for mod in boot.get("preload") or []:
        __import__(mod)
    _send(cout, {"type": "ready"})
    req = _read_msg(cin)
    cin.close()
    limit = boot.get("address_space_bytes") or 0
    if limit:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if boot.get("workspace"):
        os.chdir(boot["workspace"])
    reply = _run(req["code"], boot)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    _send(cout, {"type": "reply", "reply": reply})
    os._exit(reply.get("exit_code", 0) & 0xFF)


if __name__ == "__main__":
    main()
