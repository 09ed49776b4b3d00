# threat: network socket
# expect: rejected PJ003
# expect-kernel: ENETUNREACH: no network
import socket
socket.create_connection(("1.1.1.1", 53))
print("ESCAPED")
