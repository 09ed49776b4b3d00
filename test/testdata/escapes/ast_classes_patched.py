# threat: blinding the run-time compile check by rewriting the ast classes, then sympify with the real getattr
# expect: error PermissionError PJ010
import ast
import sympy
ast.Call._fields = ()
ast.Attribute._fields = ()
ast.NodeVisitor.generic_visit = lambda self, node: None
s = "getattr(getattr(S, '__cl' + 'ass__'), '__ba' + 'ses__')"
print("ESCAPED", sympy.sympify(s))
