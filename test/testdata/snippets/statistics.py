# snippet: descriptive statistics
# expect-stdout: 4.883 4.85 1.957
import statistics
data = [2.5, 3.1, 4.7, 5.0, 6.2, 7.8]
print(round(statistics.mean(data), 3), round(statistics.median(data), 3), round(statistics.stdev(data), 3))
print(statistics.quantiles(data, n=4))
