# threat: builtin method __self__ is the builtins module
# expect: rejected PJ002
print("ESCAPED", print.__self__)
