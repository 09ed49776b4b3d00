# threat: sympify with eval built from chr()
# expect: error PermissionError PJ010
import sympy
s = "eval(" + "+".join("chr(%d)" % ord(c) for c in "__import__('os')") + ")"
print("ESCAPED", sympy.sympify(s))
