# threat: raw, packet and netlink sockets
# issue: 22
import socket
for fam, typ, proto in [(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP), (socket.AF_PACKET, socket.SOCK_RAW, 0), (socket.AF_NETLINK, socket.SOCK_RAW, 0)]:
    try:
        socket.socket(fam, typ, proto)
        print("ESCAPED", fam, typ)
    except OSError as e:
        print("blocked", fam, e.errno)
