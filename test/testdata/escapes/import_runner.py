# threat: import the runner's process side (runner.py) to reach its state and the supervisor's channel
# expect: error ModuleNotFoundError
import runner
print("ESCAPED", runner)
