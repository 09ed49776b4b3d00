# threat: generator frame walk to the runner's globals
# expect: rejected PJ005
g = (x for x in [1])
print("ESCAPED", g.gi_frame.f_back.f_globals)
