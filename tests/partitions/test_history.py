"""The history: entries from many threads in one order, pairs, JSON lines, and its rules."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from squall.clock import FakeClock
from tests.partitions.history import INFO, OK, History, HistoryError, pairs, read_ops


def test_clients_on_threads_append_in_one_order_and_pair_up(tmp_path: Path) -> None:
    clock = FakeClock(0.0)
    history = History(clock.now)

    def client(process: int) -> None:
        for n in range(50):
            invocation = history.invoke(process, "emit", {"id": f"{process}-{n}", "words": ["a"]})
            history.ok(invocation) if n % 2 else history.info(invocation, "timed out")

    threads = [threading.Thread(target=client, args=(p,)) for p in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ops = history.ops
    assert [op.index for op in ops] == list(range(400))
    found = list(pairs(ops))
    assert len(found) == 200 and all(p.completion and p.completion.process == p.invoke.process for p in found)
    assert sum(p.type == OK for p in found) == sum(p.type == INFO for p in found) == 100
    # Written as JSON lines and read back the same
    history.write(tmp_path / "history.jsonl")
    assert read_ops(tmp_path / "history.jsonl") == ops


def test_a_process_has_one_operation_in_flight_and_an_unfinished_one_counts_as_info() -> None:
    history = History(FakeClock(0.0).now)
    first = history.invoke(1, "emit", {"id": 1, "words": []})
    with pytest.raises(HistoryError, match="process 1 invoked 'read' while its 'emit'"):
        history.invoke(1, "read", {"key": "a"})
    history.ok(first)
    with pytest.raises(HistoryError, match="is not in flight"):
        history.ok(first)
    history.invoke(1, "emit", {"id": 2, "words": []})
    assert [p.type for p in pairs(history.ops)] == [OK, INFO]


def test_a_line_that_is_not_an_entry_is_named(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text('{"index": 0, "process": 1, "type": "invoke", "f": "emit", "value": null, "time": 0}\n'
                    '{"index": 1, "process": 1, "type": "done", "f": "emit", "value": null, "time": 1}\n')
    with pytest.raises(HistoryError, match=r"history.jsonl:2: type 'done' is none of"):
        read_ops(path)
