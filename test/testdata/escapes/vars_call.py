# threat: vars() hands out namespaces
# expect: rejected PJ006
print("ESCAPED", vars())
