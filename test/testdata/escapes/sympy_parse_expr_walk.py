# threat: sympy parse_expr with a subclass walk
# expect: error PermissionError PJ010
from sympy.parsing.sympy_parser import parse_expr
print("ESCAPED", parse_expr("().__class__.__bases__[0].__subclasses__()"))
