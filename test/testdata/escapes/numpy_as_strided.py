# threat: as_strided reads memory outside the array
# expect: error AttributeError PJ008
import numpy as np
a = np.zeros(1)
print("ESCAPED", np.lib.stride_tricks.as_strided(a, shape=(1 << 20,), strides=(8,)).sum())
