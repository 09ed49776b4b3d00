# threat: sympify evaluates with the real builtins; getattr with built names walks to the runner
# expect: error PermissionError PJ010
import sympy
s = "getattr(getattr(S, '__cl' + 'ass__'), '__ba' + 'ses__')"
print("ESCAPED", sympy.sympify(s))
