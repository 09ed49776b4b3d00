# threat: pandas.eval with an attribute walk
# expect: error PermissionError PJ010
import pandas as pd
print("ESCAPED", pd.eval("(1).__class__"))
