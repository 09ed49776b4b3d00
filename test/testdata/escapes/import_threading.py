# threat: threads racing the checks
# expect: rejected PJ003
import threading
print("ESCAPED", threading.active_count())
