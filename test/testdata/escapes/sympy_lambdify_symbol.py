# threat: lambdify printing a symbol name into generated code
# expect: error PermissionError PJ010
import sympy
x = sympy.Symbol("x")
f = sympy.Function("__import__('os').system")
g = sympy.lambdify(x, f(x))
g("echo ESCAPED")
