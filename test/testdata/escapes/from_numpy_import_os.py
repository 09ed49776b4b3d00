# threat: from-import of a denied module held by an allowed one
# expect: rejected PJ007
from numpy.lib.npyio import os
os.system("echo ESCAPED")
