# threat: a data descriptor on an ast class field, so the run-time compile check reads a harmless attribute name while the library compiles the real one
# expect: error PermissionError PJ010
import ast
import functools
import sympy
class Harmless:
    pass
h = Harmless()
h.attr = "real"
def keep(node, value):
    functools.update_wrapper(node, h, assigned=(), updated=("__dict__",))
ast.Attribute.attr = property(lambda node: "real", keep)
s = "Symbol('x').__class__.__name__"
print("ESCAPED", sympy.sympify(s))
