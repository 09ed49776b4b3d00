# threat: open() of ../secret.txt next to the workspace
# expect[calc]: rejected PJ006
# expect[workspace]: error PermissionError PJ009
# expect-kernel: ENOENT: nothing above the workspace mount
print(open("../secret.txt").read())
