# threat: async generator frame walk
# expect: rejected PJ005
async def ag():
    yield 1
print("ESCAPED", ag().ag_frame)
