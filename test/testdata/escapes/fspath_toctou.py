# threat: a path-like object that names a workspace file to the check and a file outside to open()
# expect[calc]: rejected PJ006
# expect[workspace]: ok
class P:
    n = 0
    def __fspath__(self):
        P.n += 1
        return "data.csv" if P.n == 1 else "../secret.txt"
print(open(P()).read())
