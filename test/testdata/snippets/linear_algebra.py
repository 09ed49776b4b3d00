# snippet: solve a linear system and an eigen decomposition
# expect-stdout: [2.0, 3.0]
# expect-stdout: 5.0
import numpy as np
A = np.array([[3.0, 1.0], [1.0, 2.0]])
b = np.array([9.0, 8.0])
x = np.linalg.solve(A, b)
print(x.round(6).tolist())
w = np.linalg.eigvalsh(A)
print(np.round(w, 4).tolist(), round(float(np.linalg.det(A)), 6))
