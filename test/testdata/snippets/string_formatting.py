# snippet: format strings, f-strings, format_map
# expect-stdout: pi = 3.14 0003.142 pi!
# expect-stdout: pi has 2 chars ff
name, value = "pi", 3.14159
print("{} = {:.2f}".format(name, value), f"{value:08.3f}", "{n}!".format_map({"n": name}))
print("%s has %d chars" % (name, len(name)), format(255, "x"))
