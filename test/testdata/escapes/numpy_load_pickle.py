# threat: np.load of a pickle calling os.system
# expect: error UnpicklingError
# note: numpy wraps the PermissionError (PJ011) from pickle.find_class in UnpicklingError
import io
import numpy as np
payload = b"cos\nsystem\n(S'echo ESCAPED'\ntR."
np.load(io.BytesIO(payload), allow_pickle=True)
