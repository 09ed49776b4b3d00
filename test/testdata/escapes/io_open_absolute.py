# threat: io.open, the same opener reached through an allowed module
# expect[calc]: error AttributeError PJ006
# expect[workspace]: error PermissionError PJ009
import io
print(io.open("/etc/passwd").read())
