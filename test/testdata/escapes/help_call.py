# threat: help() imports pydoc and pages
# expect: rejected PJ006
help(print)
