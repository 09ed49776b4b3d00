# snippet: exact arithmetic
# expect-stdout: 0.142857142857142857142857142857
# expect-stdout: 19/12 0.125
# expect-stdout: 2.68
from decimal import Decimal, getcontext
from fractions import Fraction
getcontext().prec = 30
print(Decimal(1) / Decimal(7))
print(Fraction(3, 4) + Fraction(5, 6), float(Fraction(1, 8)))
print(round(Decimal("2.675"), 2))
