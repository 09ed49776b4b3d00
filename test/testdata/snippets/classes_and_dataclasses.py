# snippet: user classes, super().__init__, dataclasses, properties
# expect-stdout: Shape(square) 9 Point(x=1.5, y=0.0, tags=[])
from dataclasses import dataclass, field
class Shape:
    def __init__(self, name):
        self.name = name
    def __repr__(self):
        return "Shape(%s)" % self.name
class Square(Shape):
    def __init__(self, side):
        super().__init__("square")
        self.side = side
    @property
    def area(self):
        return self.side ** 2
@dataclass
class Point:
    x: float
    y: float = 0.0
    tags: list = field(default_factory=list)
s = Square(3)
print(s, s.area, Point(1.5), getattr(s, "side"), hasattr(s, "nope"))
