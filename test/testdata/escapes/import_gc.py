# threat: gc.get_objects reaches every object
# expect: rejected PJ003
import gc
print("ESCAPED", len(gc.get_objects()))
