# threat: traceback frame walk to the runner
# expect: rejected PJ002
try:
    1 / 0
except Exception as e:
    print("ESCAPED", e.__traceback__.tb_frame.f_back.f_globals)
