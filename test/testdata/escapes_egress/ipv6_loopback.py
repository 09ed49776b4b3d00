# threat: IPv6 loopback literal
# issue: 22
import socket
s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
s.sendall(b'CONNECT [::1]:443 HTTP/1.1\r\nHost: x\r\n\r\n')
s.settimeout(5)
answer = b""
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        answer += b
except OSError:
    pass
text = answer.decode("latin1")
print(text.splitlines()[0] if text else "closed")
if " 200 " in text.split("\r\n")[0] or text.count("HTTP/1.") > 1:
    print("ESCAPED")
