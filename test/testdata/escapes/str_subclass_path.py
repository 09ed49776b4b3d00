# threat: a str subclass whose methods lie to the path check
# expect[calc]: rejected PJ006
# expect[workspace]: error PermissionError PJ009
class S(str):
    def startswith(self, *a):
        return True
    def endswith(self, *a):
        return True
print(open(S("../secret.txt")).read())
