# threat: attribute access hidden in a nested format spec
# expect: error AttributeError PJ002
fmt = "{0:{1." + "__class__}}"
print("ESCAPED", fmt.format(1, 2))
