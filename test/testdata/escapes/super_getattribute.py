# threat: object.__getattribute__ called directly
# expect: rejected PJ002
print("ESCAPED", object.__getattribute__((), "__class__"))
