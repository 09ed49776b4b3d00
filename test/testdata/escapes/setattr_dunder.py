# threat: setattr of __class__
# expect[calc]: rejected PJ006
# expect[workspace]: error AttributeError PJ002
class A:
    pass
a = A()
setattr(a, "__cla" + "ss__", int)
print("ESCAPED")
