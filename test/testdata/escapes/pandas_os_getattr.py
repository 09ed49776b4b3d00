# threat: os through pandas.io.common
# expect: error ImportError PJ003
import pandas as pd
getattr(pd.io.common, "o" + "s").system("echo ESCAPED")
