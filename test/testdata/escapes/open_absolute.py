# threat: open() of a host file by absolute path
# expect[calc]: rejected PJ006
# expect[workspace]: error PermissionError PJ009
# expect-kernel: contained: the jail's /etc is not the host's
print(open("/etc/passwd").read())
