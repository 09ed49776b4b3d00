# threat: exec of a string
# expect: rejected PJ001
exec("print('ESCAPED')")
