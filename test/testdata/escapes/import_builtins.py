# threat: the builtins module holds the real eval
# expect: rejected PJ003
import builtins
builtins.eval("print('ESCAPED')")
