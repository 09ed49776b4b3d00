# threat: exit() from site
# expect: rejected PJ006
exit(0)
