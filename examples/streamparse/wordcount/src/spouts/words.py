from itertools import cycle

from streamparse import Spout

ANIMALS = ["dog", "cat", "zebra", "elephant"]


class WordSpout(Spout):
    outputs = ["word"]

    def initialize(self, stormconf, context):
        self.words = cycle(ANIMALS)

    def next_tuple(self):
        self.emit([next(self.words)])
