# threat: class body reaching object internals
# expect: error AttributeError PJ002
class A:
    k = getattr((), "__cla" + "ss__")
print("ESCAPED", A.k)
