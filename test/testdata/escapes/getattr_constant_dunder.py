# threat: getattr with a constant dunder name
# expect: rejected PJ002
print("ESCAPED", getattr(1, "__class__"))
