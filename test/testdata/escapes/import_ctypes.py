# threat: ctypes raw memory
# expect: rejected PJ003
import ctypes
print("ESCAPED", ctypes.CDLL(None))
