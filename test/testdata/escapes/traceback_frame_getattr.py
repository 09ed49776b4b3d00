# threat: traceback via getattr with built names
# expect: error AttributeError PJ002
try:
    1 / 0
except Exception as e:
    tb = getattr(e, "__trace" + "back__")
    print("ESCAPED", tb)
