# snippet: symbolic integration, differentiation and solving
# expect-stdout: sqrt(pi)
# expect-stdout: exp(x)*sin(x) + exp(x)*cos(x)
# expect-stdout: [2, 3]
# expect-stdout: 5*x
# expect-stdout: 1.0
import sympy as sp
x = sp.symbols("x")
print(sp.integrate(sp.exp(-x**2), (x, -sp.oo, sp.oo)))
print(sp.diff(sp.sin(x) * sp.exp(x), x))
print(sp.solve(x**2 - 5*x + 6, x))
print(sp.sympify("2*x + 3*x").simplify())
f = sp.lambdify(x, sp.sin(x)**2 + sp.cos(x)**2)
print(round(f(1.234), 12))
