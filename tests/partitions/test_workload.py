"""When the partition workloads call a message done: what the read checker takes for committed."""

from __future__ import annotations

import json
from contextlib import closing
from pathlib import Path

from squall.state.sqlite import SQLiteStore
from tests.partitions.history import OK, pairs
from tests.partitions.workload import TridentCount


def _write(store: SQLiteStore, txid: int, *words: str) -> None:
    keys = [json.dumps([w]) for w in words]
    store.update(keys, lambda old: {k: {"curr": 1, "prev": None, "txid": txid} for k in keys})


def test_a_trident_message_is_done_once_its_marker_and_every_word_carry_its_batch(tmp_path: Path) -> None:
    # A batch's partitions write one after another: the marker may land before a word
    # in another partition, and a DRPC read in between sees the word without the message.
    workload = TridentCount(tmp_path, "counted")
    workload.emit(7, ["w01", "w02"])
    with SQLiteStore(workload.dir / "counted.sqlite", "partitions") as store, closing(workload):
        _write(store, 4, "w02")  # an earlier batch's count of w02
        _write(store, 5, "#7", "w01")  # batch 5's first partition
        workload.observe()
        assert workload.pending() == 1
        _write(store, 5, "w02")  # its second
        workload.observe()
    assert workload.pending() == 0
    assert [p.type for p in pairs(workload.history.ops)] == [OK]
