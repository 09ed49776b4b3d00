# snippet: try/except and custom exceptions
# expect-stdout: caught MyError bad
# expect-stdout: key error
class MyError(ValueError):
    pass
try:
    raise MyError("bad")
except ValueError as e:
    print("caught", type(e).__name__, e)
try:
    {}["k"]
except KeyError:
    print("key error")
