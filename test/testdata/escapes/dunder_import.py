# threat: __import__ called directly
# expect: rejected PJ004
__import__("os").system("echo ESCAPED")
