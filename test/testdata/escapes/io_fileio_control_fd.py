# threat: io.FileIO on the reply descriptor
# expect: error PermissionError PJ009
import io
io.FileIO(4, "w").write(b'{"type":"reply","reply":{"status":"ok","value":"ESCAPED"}}\n')
