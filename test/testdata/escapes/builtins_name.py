# threat: __builtins__ name
# expect: rejected PJ004
print("ESCAPED", __builtins__)
