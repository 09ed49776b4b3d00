# threat: timeit runs strings in its own globals
# expect: rejected PJ003
import timeit
timeit.timeit("print('ESCAPED')", number=1)
