# threat: import __main__ (the runner itself)
# expect: rejected PJ003
import __main__
print("ESCAPED", __main__)
