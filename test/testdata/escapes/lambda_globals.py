# threat: function __globals__
# expect: rejected PJ002
print("ESCAPED", (lambda: 0).__globals__)
