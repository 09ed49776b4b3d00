# threat: coroutine frame walk
# expect: rejected PJ005
async def c():
    pass
co = c()
print("ESCAPED", co.cr_frame.f_globals)
