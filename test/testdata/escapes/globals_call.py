# threat: globals() hands out __builtins__
# expect: rejected PJ006
print("ESCAPED", globals()["__builtins__"])
