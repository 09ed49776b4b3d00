# threat: operator.attrgetter with a dunder name
# expect: error AttributeError PJ008
import operator
print("ESCAPED", operator.attrgetter("__cla" + "ss__")(1))
