# pyjail runner: the wire to the supervisor. See package pyrunner for the
# protocol.
#
# The descriptors of the supervisor's channel, reading one message and
# sending one, and the serialiser of every message the runner sends. The
# serialiser calls no library class, so that user code, which can rewrite
# library classes, can never forge a reply. Every module of the runner
# sends through here; this module imports nothing of the runner.
import json

# The supervisor's channel (pyrunner.FDControlIn, FDControlOut). Once user
# code runs, the fence refuses to open them for anyone, libraries included.
FD_CONTROL_IN, FD_CONTROL_OUT = 3, 4


def read_msg(f):
    line = f.readline()
    if not line:
        raise EOFError("control channel closed")
    return json.loads(line)


def send(out, msg):
    out.write(dumps(msg) + "\n")
    out.flush()


# Captured at import, before user code: user code can reassign attributes
# of library classes (json.encoder.JSONEncoder.encode is a plain class
# attribute, and setting it raises no audit event), so the reply is
# serialised without any library class -- user code must not forge it.
_quote = json.encoder.encode_basestring_ascii


def dumps(v):
    t = type(v)
    if v is None:
        return "null"
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return int.__repr__(v)
    if t is str:
        return _quote(v)
    if t is dict:
        return "{" + ", ".join(_quote(str.__str__(k)) + ": " + dumps(x) for k, x in dict.items(v)) + "}"
    if t is list:
        return "[" + ", ".join(dumps(x) for x in v) + "]"
    # Anything else in a reply is a runner bug or a user object that slipped
    # in (an int subclass as exit code): send its type, never call it.
    return _quote("<%s>" % type.__dict__["__name__"].__get__(t, type))
