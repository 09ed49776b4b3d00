# threat: sympify of an attribute chain to a module global of sympy
# expect: error PermissionError PJ010
import sympy
print("ESCAPED", sympy.sympify("sympy.core.sympify.os"))
