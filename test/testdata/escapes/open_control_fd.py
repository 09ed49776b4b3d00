# threat: forging the reply on fd 4
# expect[calc]: rejected PJ006
# expect[workspace]: error PermissionError PJ009
f = open(4, "w")
f.write('{"type":"reply","reply":{"status":"ok","value":"ESCAPED"}}\n')
f.flush()
