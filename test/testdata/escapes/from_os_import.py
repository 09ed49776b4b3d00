# threat: from os import system
# expect: rejected PJ003
from os import system
system("echo ESCAPED")
