# threat: compile of a string
# expect: rejected PJ001
print("ESCAPED", compile("1", "x", "eval"))
