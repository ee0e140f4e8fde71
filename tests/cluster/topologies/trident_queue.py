"""The partition tests' Trident word count: the client's queue file (queue_wordcount.py)
in batches, counted exactly once into an opaque SQLite map state (every node's workers
share the file, as a node's would with a database), and a DRPC stream ``words`` reading
the counts while faults are played.

A batch is a range of the queue's lines, chosen by the coordinator and stored with its
txid, so a replay emits the same messages.  Each message adds a pseudo-word ``#<id>`` to
the count, as the transactional count does: the committed ``#<id>`` keys say which
messages committed.  The state's file is ``squall.state.dir``/<topology>.sqlite.  The
counting and the DRPC stream are trident_wordcount.py's (``count_words``), imported as a
sibling module (shipped with this file).
"""

from __future__ import annotations

import os
from typing import Any

from trident_wordcount import count_words

from squall.trident import BatchSpout, SqliteMapState, TridentTopology

NAMESPACE = "partitions"


def _lines(path: str) -> list[bytes]:
    if not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        return f.read().split(b"\n")[:-1]  # complete lines only


class QueueBatches(BatchSpout):
    output_fields = ["sentence"]

    def __init__(self, take: int = 40) -> None:
        self.take = take

    def open(self, conf: dict[str, Any], context: Any) -> None:
        self.queue = os.path.join(conf["squall.test.dir"], "queue.log")

    def batch_metadata(self, txid: int, previous: Any) -> Any:
        start = (previous or {}).get("end", 0)
        return {"start": start, "end": min(start + self.take, len(_lines(self.queue)))}

    def emit_batch(self, batch_id: int, collector: Any) -> None:
        meta = collector.metadata
        lines = _lines(self.queue)[meta["start"]:meta["end"]]
        for line in lines[collector.task_index::collector.tasks]:
            key, _, sentence = line.decode().partition(" ")
            collector.emit([f"{sentence} #{key}"])


topology = TridentTopology()
counts = count_words(topology, topology.new_stream("queue", QueueBatches()).parallelism_hint(2),
                     SqliteMapState.opaque(namespace=NAMESPACE), 2)
