"""A Trident word count for the chaos test: exactly once into an opaque Redis map state, with a
DRPC stream ``words`` querying it.

Each batch is a function of its txid (``sentences(txid)``): the coordinator's
``batch_metadata`` names the txid, Squall stores it in ZooKeeper before the batch goes out,
and the emitters make the batch from it, so a replay (after a worker, the coordinator or
ZooKeeper went away) emits the same sentences.  Batches follow one another as fast as they
commit (one in flight at a time), so a blow nearly always falls on one.

Once the file ``stop`` exists in ``squall.test.dir``, every new batch is empty (and so is
every batch after an empty one): the counts stop moving while the coordinator goes on.  The
coordinator writes the first empty txid to ``stopped-at`` and, after each commit, the
committed txid to ``committed``: once ``committed`` reaches ``stopped-at``, every batch with
sentences has committed, and the state must hold exactly ``expected(stopped_at - 1)``.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from typing import Any

from squall.contrib.redis import RedisMapState
from squall.trident import BatchSpout, Count, FilterNull, MapGet, Sum, TridentTopology
from squall.trident.testing import Split

VOCAB = [f"w{i}" for i in range(40)]
SENTENCES_PER_BATCH = 12
NAMESPACE = "trident-chaos"  # the state's hash: squall:trident:trident-chaos


def sentences(txid: int) -> list[str]:
    """The sentences of batch ``txid``: the same in every process, every time."""
    rng = random.Random(txid)
    return [" ".join(rng.choices(VOCAB, k=6)) for _ in range(SENTENCES_PER_BATCH)]


def expected(last_txid: int) -> Counter[str]:
    """The exact word counts once batches 1..last_txid have committed."""
    return Counter(w for txid in range(1, last_txid + 1) for s in sentences(txid) for w in s.split())


def _write_atomically(path: str, text: str) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


class TxidSentences(BatchSpout):
    output_fields = ["sentence"]

    def open(self, conf: dict[str, Any], context: Any) -> None:
        self.dir = conf["squall.test.dir"]

    # -- the coordinator's side

    def batch_metadata(self, txid: int, previous: Any) -> Any:
        if (previous or {}).get("empty") or os.path.exists(os.path.join(self.dir, "stop")):
            stopped_at = os.path.join(self.dir, "stopped-at")
            if not os.path.exists(stopped_at):
                _write_atomically(stopped_at, str(txid))
            return {"txid": txid, "empty": True}
        return {"txid": txid, "empty": False}

    def success(self, txid: int) -> None:
        _write_atomically(os.path.join(self.dir, "committed"), str(txid))

    # -- the emitters' side

    def emit_batch(self, batch_id: int, collector: Any) -> None:
        meta = collector.metadata
        if meta["empty"]:
            return
        for sentence in sentences(meta["txid"])[collector.task_index::collector.tasks]:
            collector.emit([sentence])


def count_words(topology: TridentTopology, sentences: Any, state: Any, parallelism: int) -> Any:
    """The words of a stream of ``sentence`` counted exactly once into ``state``, and a DRPC
    stream ``words`` summing the counts of the words asked (the partition tests' Trident
    count, trident_queue.py, is this one over another source and state)."""
    counts = (sentences.each(["sentence"], Split(), ["word"])
              .group_by(["word"])
              .persistent_aggregate(state, Count(), ["count"])
              .parallelism_hint(parallelism))
    (topology.new_drpc_stream("words")
     .each(["args"], Split(), ["word"])
     .group_by(["word"])
     .state_query(counts, ["word"], MapGet(), ["count"])
     .each(["count"], FilterNull())
     .aggregate(["count"], Sum(), ["sum"]))
    return counts


topology = TridentTopology()
counts = count_words(topology, topology.new_stream("chaos-sentences", TxidSentences()).parallelism_hint(2),
                     RedisMapState.opaque(namespace=NAMESPACE), 3)
