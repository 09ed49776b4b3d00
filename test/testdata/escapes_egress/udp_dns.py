# threat: DNS over UDP from the jail
# issue: 22
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
try:
    s.sendto(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01", ("8.8.8.8", 53))
    s.recvfrom(512)
    print("ESCAPED")
except OSError as e:
    print("blocked", e)
