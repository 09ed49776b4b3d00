# threat: import the language fence (fence.py) to reach its state, its real builtins or its switch for the audit hook
# expect: error ModuleNotFoundError
import fence
print("ESCAPED", fence)
