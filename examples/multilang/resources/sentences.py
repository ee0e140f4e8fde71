"""A reliable sentence spout on Squall's Python adapter (squall.multilang.child).

Emits random sentences with message ids, replays the failed ones, forgets
the acked ones.  ``sentences.limit`` in the topology conf stops it after
that many sentences (unlimited by default).
"""

import random

from squall.multilang.child import Spout

WORDS = ["the", "cow", "jumped", "over", "the", "moon", "an", "apple", "a", "day", "keeps", "the",
         "doctor", "away", "four", "score", "and", "seven", "years", "ago", "snow", "white", "and",
         "the", "seven", "dwarfs", "i", "am", "at", "two", "with", "nature"]


class Sentences(Spout):
    def initialize(self, conf, context):
        self.rng = random.Random(context["taskid"])
        self.limit = conf.get("sentences.limit")
        self.emitted = 0
        self.pending = {}
        self.replay = []

    def next_tuple(self):
        if self.replay:
            msg_id = self.replay.pop()
        elif self.limit is None or self.emitted < self.limit:
            msg_id = self.emitted
            self.emitted += 1
            self.pending[msg_id] = " ".join(self.rng.choice(WORDS) for _ in range(6))
        else:
            return
        self.emit([self.pending[msg_id]], tup_id=msg_id)

    def ack(self, tup_id):
        self.pending.pop(tup_id, None)

    def fail(self, tup_id):
        if tup_id in self.pending:
            self.replay.append(tup_id)


if __name__ == "__main__":
    Sentences().run()
