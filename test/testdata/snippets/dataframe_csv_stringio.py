# snippet: read CSV text from memory
# expect-stdout: [2.0, 3.0]
import io
import pandas as pd
df = pd.read_csv(io.StringIO("x,y\n1,2\n3,4\n"))
print(df.describe().loc["mean"].tolist())
