# threat: numpy.ctypeslib pointers
# expect: error ImportError PJ003
import numpy as np
print("ESCAPED", np.ctypeslib)
