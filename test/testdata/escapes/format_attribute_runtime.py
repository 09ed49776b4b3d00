# threat: str.format with a format string built at run time
# expect: error AttributeError PJ002
fmt = "ESCAPED {0." + "__class__}"
print(fmt.format(1))
