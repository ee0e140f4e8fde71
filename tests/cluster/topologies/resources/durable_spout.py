"""The durable sentence source of durable_wordcount.py, as a multilang child
on Squall's Python adapter: sentences from a file, acked ids appended to a log."""

import json
import os

from squall.multilang.child import Spout


class DurableSentences(Spout):
    def initialize(self, conf, context):
        self.dir = conf["squall.test.dir"]
        with open(os.path.join(self.dir, "sentences.json")) as f:
            self.sentences = dict(json.load(f))
        acked_path = os.path.join(self.dir, "acked.log")
        done = set()
        if os.path.exists(acked_path):
            with open(acked_path) as f:
                done = {int(line) for line in f if line.strip()}
        self.todo = [k for k in sorted(self.sentences, key=int) if int(k) not in done]
        self.acked = open(acked_path, "a", buffering=1)  # noqa: SIM115 - kept open: ack() appends to it

    def next_tuple(self):
        if self.todo:
            key = self.todo.pop(0)
            self.emit([int(key), self.sentences[key]], tup_id=int(key))

    def ack(self, tup_id):
        self.acked.write(f"{tup_id}\n")

    def fail(self, tup_id):
        self.todo.append(str(tup_id))


if __name__ == "__main__":
    DurableSentences().run()
