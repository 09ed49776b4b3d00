# snippet: optimisation and statistics with scipy
# expect-stdout: 2.0
# expect-stdout: 0.975
# expect-stdout: True
import numpy as np
from scipy import optimize, stats
r = optimize.minimize_scalar(lambda x: (x - 2) ** 2 + 1)
print(round(r.x, 4))
print(round(stats.norm.cdf(1.96), 4))
t = stats.ttest_ind([1, 2, 3, 4, 5], [2, 3, 4, 5, 9])
print(round(t.pvalue, 4) > 0)
