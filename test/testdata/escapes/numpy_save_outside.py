# threat: numpy.save writing outside the workspace
# expect: error PermissionError PJ009
import numpy as np
np.save("/tmp/escaped.npy", np.zeros(3))
