# threat: DataFrame.to_csv writing outside the workspace
# expect: error PermissionError PJ009
import pandas as pd
pd.DataFrame({"a": ["ESCAPED"]}).to_csv("../out.csv")
