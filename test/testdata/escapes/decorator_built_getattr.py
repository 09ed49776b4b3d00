# threat: decorator reading function globals with a built name
# expect: error AttributeError PJ002
def deco(f):
    return getattr(f, "__glob" + "als__")
@deco
def h():
    pass
print("ESCAPED", h)
