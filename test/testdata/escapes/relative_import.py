# threat: relative import
# expect: rejected PJ003
from . import runner
print("ESCAPED")
