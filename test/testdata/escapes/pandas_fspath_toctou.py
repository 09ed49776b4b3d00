# threat: a path-like object handed to pandas that changes its answer between calls
# expect: error PermissionError PJ009
import pandas as pd
class P:
    n = 0
    def __fspath__(self):
        P.n += 1
        return "data.csv" if P.n % 2 else "../secret.txt"
print(pd.read_csv(P()).to_string(), pd.read_csv(P()).to_string())
