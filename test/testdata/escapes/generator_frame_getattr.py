# threat: generator frame through getattr with a built name
# expect: error AttributeError PJ005
g = (x for x in [1])
f = getattr(g, "gi_" + "frame")
print("ESCAPED", f)
