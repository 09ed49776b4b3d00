# threat: import os.path to list files
# expect: rejected PJ003
import os.path
print("ESCAPED", os.path.exists("/etc/passwd"))
