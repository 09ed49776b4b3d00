# threat: fullwidth unicode identifier that NFKC-normalises to exec
# expect: rejected PJ001
ｅｘｅｃ("print('ESCAPED')")
