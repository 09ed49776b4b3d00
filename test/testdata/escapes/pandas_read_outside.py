# threat: pandas.read_csv of a file outside the workspace
# expect: error PermissionError PJ009
import pandas as pd
print(pd.read_csv("../secret.txt"))
