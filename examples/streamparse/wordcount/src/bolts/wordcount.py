import os
from collections import Counter

from streamparse import Bolt


class WordCountBolt(Bolt):
    outputs = ["word", "count"]

    def initialize(self, conf, ctx):
        self.counts = Counter()
        self.seen = 0
        self.pid = os.getpid()

    def process(self, tup):
        word = tup.values[0]
        weight = 10 if word == "dog" else 1  # dogs count ten times
        self.counts[word] += weight
        self.seen += weight
        if self.seen % 1000 == 0:
            self.logger.info("counted [%s] words [pid=%s]", f"{self.seen:,}", self.pid)
        self.emit([word, self.counts[word]])
