"""The kitchen-sink test spout on Squall's own adapter (squall.multilang.child).

``test.spout.items``: ``[[msg_id, sentence], ...]`` emitted in order, one per
``next`` (``msg_id`` null = unreliable).  Special sentences: ``ASK`` (emit
asking for task ids, report them), ``EMPTY`` (emit nothing), ``HANG``,
``EXIT``, ``ILLEGAL`` (send an ack command, which spouts may not), ``BIG <n>``
(emit a string of n characters).  acks,
fails, activate and deactivate are reported on the ``events`` stream as JSON;
with ``test.spout.replay`` a failed item is emitted again.
The serializer comes from the parent.
"""

import json
import os
import time

from squall.multilang.child import Spout


class Kitchen(Spout):
    def initialize(self, storm_conf, context):
        self.items = [tuple(item) for item in storm_conf.get("test.spout.items", [])]
        self.by_id = {json.dumps(i): s for i, s in self.items}
        self.replay = storm_conf.get("test.spout.replay", False)
        self.todo = list(self.items)
        self.event(["started", os.getpid()])

    def event(self, what):
        self.emit([json.dumps(what)], stream="events")

    def activate(self):
        self.event(["activate"])

    def deactivate(self):
        self.event(["deactivate"])

    def next_tuple(self):
        if not self.todo:
            return
        msg_id, sentence = self.todo.pop(0)
        if sentence == "EMPTY":
            return
        if sentence == "HANG":
            self.pipe.flush()
            time.sleep(3600)
        if sentence == "EXIT":
            self.pipe.flush()
            os._exit(3)
        if sentence == "ILLEGAL":
            self.send_message({"command": "ack", "id": msg_id})
            return
        if sentence.startswith("BIG "):
            self.emit(["x" * int(sentence[4:])], tup_id=msg_id)
            return
        if sentence == "ASK":
            ids = self.emit([sentence], tup_id=msg_id, need_task_ids=True)
            self.event(["ids", ids])
            return
        self.emit([sentence], tup_id=msg_id)

    def ack(self, tup_id):
        self.event(["ack", tup_id])

    def fail(self, tup_id):
        self.event(["fail", tup_id])
        if self.replay:
            self.todo.append((tup_id, self.by_id[json.dumps(tup_id)]))


if __name__ == "__main__":
    Kitchen().run()
