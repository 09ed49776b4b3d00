# threat: os through numpy with a built attribute name
# expect: error ImportError PJ003
import numpy as np
getattr(np.lib.npyio, "o" + "s").system("echo ESCAPED")
