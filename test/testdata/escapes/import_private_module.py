# threat: private submodule of an allowed package
# expect: rejected PJ003
import numpy.core._internal
print("ESCAPED")
