# threat: private numpy internals through an attribute
# expect: error AttributeError PJ002
import numpy as np
print("ESCAPED", np.core._multiarray_umath)
