# threat: eval of a string
# expect: rejected PJ001
print("ESCAPED", eval("1+1"))
