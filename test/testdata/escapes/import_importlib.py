# threat: importlib.import_module
# expect: rejected PJ003
import importlib
importlib.import_module("os").system("echo ESCAPED")
