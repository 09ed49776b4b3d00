# threat: locals() at module level
# expect: rejected PJ006
print("ESCAPED", locals())
