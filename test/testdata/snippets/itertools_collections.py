# snippet: combinatorics and counters
# expect-stdout: 12 [1, 3, 6]
# expect-stdout: [('i', 4), ('s', 4)]
# expect-stdout: {'k': [1]} deque([2, 3], maxlen=2)
# expect-stdout: P(x=1, y=5) ['a', 'b']
import itertools
from collections import Counter, defaultdict, deque, namedtuple, OrderedDict
print(len(list(itertools.permutations(range(4), 2))), list(itertools.accumulate([1, 2, 3])))
c = Counter("mississippi")
print(c.most_common(2))
d = defaultdict(list)
d["k"].append(1)
print(dict(d), deque([1, 2, 3], maxlen=2))
P = namedtuple("P", "x y")
print(P(1, 2)._replace(y=5), list(OrderedDict(a=1, b=2)))
