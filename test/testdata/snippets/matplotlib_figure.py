# snippet: a plot becomes a PNG image in the reply
# expect-stdout: plotted
import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [1, 4, 9])
plt.title("squares")
print("plotted")
