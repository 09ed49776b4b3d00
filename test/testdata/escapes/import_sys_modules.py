# threat: sys.modules to reach the runner
# expect: rejected PJ003
import sys
print("ESCAPED", sys.modules["__main__"])
