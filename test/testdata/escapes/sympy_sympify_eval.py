# threat: sympy.sympify evaluates its string with eval
# expect: error PermissionError PJ010
import sympy
sympy.sympify("__import__('os').system('echo ESCAPED')")
