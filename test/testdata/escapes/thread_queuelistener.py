# threat: a thread that outlives the call, started through logging.handlers.QueueListener, which the threading deny-list does not name (issue 21)
# expect: error PermissionError PJ011
import logging.handlers
import queue
q = queue.Queue()
listener = logging.handlers.QueueListener(q)
listener.start()
print("ESCAPED")
