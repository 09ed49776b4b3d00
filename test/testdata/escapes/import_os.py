# threat: import os
# expect: rejected PJ003
# expect-kernel: contained: the shell runs inside the jail only
import os
os.system("echo ESCAPED")
