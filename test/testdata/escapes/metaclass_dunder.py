# threat: metaclass touching __subclasses__
# expect: rejected PJ002
class M(type):
    def all(cls):
        return cls.__subclasses__()
print("ESCAPED", M.all(object))
