# threat: subprocess
# expect: rejected PJ003
# expect-kernel: contained: processes stay in the jail's pid namespace
import subprocess
subprocess.run(["echo", "ESCAPED"])
