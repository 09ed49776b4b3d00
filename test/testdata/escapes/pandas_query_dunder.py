# threat: DataFrame.query with an attribute walk
# expect: error PermissionError PJ010
import pandas as pd
df = pd.DataFrame({"a": [1, 2]})
print("ESCAPED", df.query("a.__class__ == a.__class__"))
