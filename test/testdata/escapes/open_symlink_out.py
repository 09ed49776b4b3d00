# threat: open() of a workspace symlink pointing outside
# expect[calc]: rejected PJ006
# expect[workspace]: error PermissionError PJ009
# expect-kernel: ENOENT: the link's target is not in the jail
print(open("link_out").read())
