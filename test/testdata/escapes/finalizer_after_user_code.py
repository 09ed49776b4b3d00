# threat: a finalizer that runs after the user's code, hoping the checks are off by then
# expect: ok
import io
import numpy as np
class Later:
    def __del__(self):
        payload = b"cos\nsystem\n(S'echo ESCAPED'\ntR."
        try:
            np.load(io.BytesIO(payload), allow_pickle=True)
        except Exception:
            pass
a = Later()
b = Later()
a.other, b.other = b, a
del a, b
