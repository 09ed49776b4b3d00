# threat: renaming an ast class so a visitor dispatches it to the wrong method
# expect: rejected PJ002
import ast
ast.Name.__name__ = "Constant"
