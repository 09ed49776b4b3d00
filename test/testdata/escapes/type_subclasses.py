# threat: type.__subclasses__ on object
# expect: rejected PJ002
print("ESCAPED", type.__subclasses__(object))
