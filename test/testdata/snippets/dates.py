# snippet: dates, times, deltas and pandas date ranges
# expect-stdout: 2024-03-01 Friday
# expect-stdout: 5227200.0
# expect-stdout: ['2024-01-01', '2024-02-01', '2024-03-01']
# expect-stdout: 2020-05-17
import datetime as dt
import pandas as pd
d = dt.date(2024, 2, 28) + dt.timedelta(days=2)
print(d.isoformat(), d.strftime("%A"))
print((dt.datetime(2024, 3, 1, 12) - dt.datetime(2024, 1, 1)).total_seconds())
r = pd.date_range("2024-01-01", periods=3, freq="MS")
print([str(x.date()) for x in r])
print("{:%Y-%m-%d}".format(dt.date(2020, 5, 17)))
