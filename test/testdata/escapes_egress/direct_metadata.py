# threat: direct TCP to the metadata address, around the gateway
# issue: 22
import socket
try:
    socket.create_connection(("169.254.169.254", 80), timeout=3)
    print("ESCAPED")
except OSError as e:
    print("blocked", e.errno)
