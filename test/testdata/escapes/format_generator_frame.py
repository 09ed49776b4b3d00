# threat: format string walking a generator frame (no dunder)
# expect: error AttributeError PJ005
def g():
    yield 1
fmt = "ESCAPED {0.gi_fr" + "ame.f_globals}"
print(fmt.format(g()))
