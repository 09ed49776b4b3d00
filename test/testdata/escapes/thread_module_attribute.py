# threat: threading reached as an attribute of a stdlib module that imports it (logging.handlers.threading) (issue 21)
# expect: error ImportError PJ003
import logging.handlers
t = logging.handlers.threading.Thread(target=print, args=("ESCAPED",))
t.start()
t.join()
