# threat: sympy.external.import_module imports any module
# expect: error ImportError PJ003
import sympy
print("ESCAPED", sympy.external.import_module("os"))
