# threat: sympy.utilities.source.get_class imports by dotted name
# expect: rejected PJ003
from sympy.utilities.source import get_class
get_class("os.system")("echo ESCAPED")
