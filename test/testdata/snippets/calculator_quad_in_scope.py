# snippet: the documented example with modules in scope, no import
# layers: calc
# expect-stdout: result=3.104379017855555
# expect-stdout: error≈2.0e-10
result, error = scipy.integrate.quad(lambda x: np.exp(np.sin(2 * x)), 0, np.pi / 2)
print(f"result={result}")
print(f"error≈{error:.1e}")
