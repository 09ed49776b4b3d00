# threat: subclass walk with attribute names built at run time
# expect: error AttributeError PJ002
cls = getattr((), "__cl" + "ass__")
base = getattr(cls, "__ba" + "ses__")[0]
print("ESCAPED", getattr(base, "__subcl" + "asses__")())
