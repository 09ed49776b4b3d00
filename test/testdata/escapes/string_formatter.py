# threat: string.Formatter reading attributes by name
# expect: error AttributeError PJ002
import string
print("ESCAPED", string.Formatter().format("{0." + "__class__}", 1))
