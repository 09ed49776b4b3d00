# snippet: files inside the workspace with open, pandas and numpy
# layers: workspace
# expect-stdout: hello a,b
# expect-stdout: [3, 7]
# expect-stdout: [0, 1, 2, 3]
# expect-stdout: [0.0, 1.0, 2.0]
import numpy as np
import pandas as pd
with open("notes.txt", "w") as f:
    f.write("hello\n")
print(open("notes.txt").read().strip(), open("link_in").read().splitlines()[0])
df = pd.read_csv("data.csv")
df["c"] = df["a"] + df["b"]
df.to_csv("out.csv", index=False)
print(pd.read_csv("./out.csv")["c"].tolist())
np.save("arr.npy", np.arange(4))
print(np.load("arr.npy").tolist())
np.savetxt("arr.txt", np.arange(3))
print(np.loadtxt("arr.txt").tolist())
