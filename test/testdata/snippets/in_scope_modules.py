# snippet: every calc module is in scope without import
# layers: calc
# expect-stdout: 4.0 2 2024-01-31
# expect-stdout: 0.3 1
# expect-stdout: [0, 1, 2] [('a', 2)]
# expect-stdout: [0, 1, 2] 3 2*sqrt(2)
print(math.sqrt(16), statistics.mean([1, 2, 3]), datetime.date(2024, 1, 31).isoformat())
print(decimal.Decimal("0.1") + decimal.Decimal("0.2"), fractions.Fraction(1, 3) * 3)
print(list(itertools.islice(itertools.count(), 3)), collections.Counter("aab").most_common(1))
print(np.arange(3).tolist(), pd.Series([1, 2]).sum(), sympy.sqrt(8))
