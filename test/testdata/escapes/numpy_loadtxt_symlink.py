# threat: numpy.loadtxt through a symlink out of the workspace
# expect: error PermissionError PJ009
import numpy as np
print(np.loadtxt("link_out", dtype=str))
