# threat: patching a library class the runner uses to forge the reply (json's encoder)
# expect: ok
# note: the patch itself succeeds (class attributes raise no audit event); the runner serialises the reply without library classes, so the reply is not forged
import json
json.encoder.JSONEncoder.encode = lambda self, o: '{"type": "reply", "reply": {"status": "ok", "value": "ESCAPED"}}'
