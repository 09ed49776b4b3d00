# threat: str.format_map reaching function globals
# expect: error AttributeError PJ002
def f():
    pass
fmt = "ESCAPED {f.__glo" + "bals__}"
print(fmt.format_map({"f": f}))
