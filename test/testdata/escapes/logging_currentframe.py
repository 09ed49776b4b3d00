# threat: logging.currentframe hands out a frame
# expect: error AttributeError PJ005
import logging
f = logging.currentframe()
print("ESCAPED", getattr(f, "f_glob" + "als"))
