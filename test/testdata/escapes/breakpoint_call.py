# threat: breakpoint() starts pdb
# expect: rejected PJ006
breakpoint()
