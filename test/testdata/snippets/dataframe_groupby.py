# snippet: dataframe building, groupby, aggregation, merge
# expect-stdout:    a     40     2.0
# expect-stdout: 4
# expect-stdout: [50, 40]
# expect-stdout: (3, 3)
# expect-stdout: {'a': 40, 'b': 70, 'c': 40}
import pandas as pd
df = pd.DataFrame({"city": ["a", "b", "a", "c", "b"], "sales": [10, 20, 30, 40, 50], "n": [1, 2, 3, 4, 5]})
g = df.groupby("city").agg(total=("sales", "sum"), mean_n=("n", "mean")).reset_index()
print(g.to_string(index=False))
other = pd.DataFrame({"city": ["a", "b"], "region": ["x", "y"]})
print(len(df.merge(other, on="city")))
print(df.sort_values("sales", ascending=False).head(2)["sales"].tolist())
print(df.query("sales > 20").shape)
print(df.pivot_table(index="city", values="sales", aggfunc="sum")["sales"].to_dict())
