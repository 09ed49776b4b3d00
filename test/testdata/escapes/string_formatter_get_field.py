# threat: string.Formatter.get_field with a dunder field
# expect: error AttributeError PJ002
import string
print("ESCAPED", string.Formatter().get_field("0." + "__class__", (1,), {}))
