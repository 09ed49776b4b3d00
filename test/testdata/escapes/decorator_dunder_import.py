# threat: decorator expression reaching __import__
# expect: rejected PJ004
@__import__("os").system
def f():
    pass
