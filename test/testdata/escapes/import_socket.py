# threat: network socket
# expect: rejected PJ003
# expect-kernel: EAFNOSUPPORT: no inet socket without egress
import socket
socket.create_connection(("1.1.1.1", 53))
print("ESCAPED")
