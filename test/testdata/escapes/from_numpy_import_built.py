# threat: a denied module held by an allowed one, named at run time through the import machinery
# expect: error ImportError PJ003
import numpy.lib.npyio as npyio
name = "o" + "s"
mod = getattr(npyio, name)
mod.system("echo ESCAPED")
