# threat: pandas reading a URL
# expect: error PermissionError PJ011
# expect-kernel: EAFNOSUPPORT: no inet socket without egress
import pandas as pd
print("ESCAPED", pd.read_csv("http://127.0.0.1:9/x.csv"))
