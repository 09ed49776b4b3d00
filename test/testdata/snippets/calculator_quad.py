# snippet: the calculator server's documented example
# expect-stdout: result=3.104379017855555
# expect-stdout: error≈2.0e-10
import numpy as np
from scipy.integrate import quad
result, error = quad(lambda x: np.exp(np.sin(2 * x)), 0, np.pi / 2)
print(f"result={result}")
print(f"error≈{error:.1e}")
