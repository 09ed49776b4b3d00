# snippet: the value of the last expression is returned
# expect-value: 42
x = 6 * 7
x
