# threat: pd.read_pickle calling os.system
# expect: error PermissionError PJ011
import io
import pandas as pd
payload = b"cos\nsystem\n(S'echo ESCAPED'\ntR."
pd.read_pickle(io.BytesIO(payload))
