# threat: os through numpy.lib.npyio.os
# expect: rejected PJ007
import numpy as np
np.lib.npyio.os.system("echo ESCAPED")
