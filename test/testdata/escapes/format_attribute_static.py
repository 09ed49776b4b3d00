# threat: str.format reading dunder attributes from a literal
# expect: rejected PJ002
print("ESCAPED {0.__class__.__mro__}".format(1))
