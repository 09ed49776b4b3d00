# threat: match statement reading a dunder attribute
# expect: rejected PJ002
match 1:
    case int(__class__=c):
        print("ESCAPED", c)
