# threat: unicode dunder attribute that normalises to __class__
# expect: rejected PJ002
print("ESCAPED", ().__ｃｌａｓｓ__)
