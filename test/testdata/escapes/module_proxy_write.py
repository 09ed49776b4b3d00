# threat: replacing a library function for other code
# expect: error AttributeError read-only
import math
math.sqrt = print
print("ESCAPED")
