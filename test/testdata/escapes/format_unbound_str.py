# threat: str.format called unbound with the format string as argument
# expect: error AttributeError PJ002
print(str.format("ESCAPED {0." + "__class__}", 1))
