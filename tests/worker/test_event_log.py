"""The event logger (squall.worker.event_lines, squall.worker.event_log): which emitted
tuples are sampled, the line each becomes, and the writer that keeps a slow file from
holding up the executors."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

from squall.runtime.debug_options import DebugOptions
from squall.testing import poll_for
from squall.worker.event_lines import MAX_LINE_CHARS, TaskSampler, event_line, render, timestamp
from squall.worker.event_log import EventLog
from tests.worker.test_emit import Bolt, Spout

WALL = 1_765_145_401.123  # 2025-12-07T22:10:01.123Z


def test_a_line_says_when_which_task_of_which_component_on_which_stream_emitted_what() -> None:
    assert timestamp(WALL) == "2025-12-07T22:10:01.123Z"
    assert event_line(WALL, "split", 3, "default", None, ("the", 1)) == \
        "2025-12-07T22:10:01.123Z,split,3,default,,['the', 1]\n"
    assert event_line(WALL, "sentences", 1, "s", "id-42", ["a b"]) == \
        "2025-12-07T22:10:01.123Z,sentences,1,s,'id-42',['a b']\n"


class Hostile:
    def __repr__(self) -> str:
        raise RuntimeError("no")


def test_values_are_rendered_safely_short_and_on_one_line() -> None:
    values = ["x" * 100_000, "two\nlines", Hostile(), list(range(1000))]
    line = event_line(WALL, "c", 1, "default", None, values)
    assert line.endswith("\n") and line.count("\n") == 1
    assert len(line) <= MAX_LINE_CHARS + 1
    assert "two\\nlines" in line and "Hostile" in line
    assert render(b"\x00\r\n") == "b'\\x00\\r\\n'"
    huge = event_line(WALL, "c", 1, "default", None, [[str(i) * 300 for i in range(40)]] * 30)
    assert len(huge) == MAX_LINE_CHARS + 1 and huge.endswith("...\n")


def test_a_sampler_passes_its_share_of_tuples_repeatably_with_a_seeded_source() -> None:
    def run(pct: float) -> list[Any]:
        got: list[Any] = []
        sampler = TaskSampler("split", 3, pct, lambda *event: got.append(event), random.Random(7).random)
        for i in range(10_000):
            sampler("default", None, [i])
        return got

    assert len(run(100.0)) == 10_000
    assert run(100.0)[0] == ("split", 3, "default", None, [0])
    ten = run(10.0)
    assert 900 < len(ten) < 1100 and ten == run(10.0)
    assert run(0.0) == []


def read_lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def open_events(tmp_path: Path) -> tuple[int, Path]:
    path = tmp_path / "events.log"
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), path


def test_the_engines_emitters_are_sampled_as_settings_say_and_changes_apply_at_once(tmp_path: Path) -> None:
    fd, path = open_events(tmp_path)
    events = EventLog(fd, {"words": False, "split": False}, wall=lambda: WALL, flush_secs=0.01)
    events.start()
    try:
        spout, bolt = Spout([10], [10]), Bolt()
        events.attach("words", 2, spout.emit)
        events.attach("split", 3, bolt.emit)
        spout.emit(["before"], tup_id=1)
        bolt.emit(["before"])
        events.configure(DebugOptions().with_setting("words", True, 100.0))
        spout.emit(["sampled"], tup_id="m-1")
        bolt.emit(["not-sampled"])
        poll_for(lambda: read_lines(path), timeout=5, message="no event line written")
        assert read_lines(path) == ["2025-12-07T22:10:01.123Z,words,2,default,'m-1',['sampled']"]
        events.configure(DebugOptions().with_setting(None, True, 100.0).with_setting("words", False, 0.0))
        spout.emit(["stopped"], tup_id=2)
        bolt.emit(["now"])
        events.configure(DebugOptions())
        bolt.emit(["off again"])
    finally:
        events.close()
    assert read_lines(path)[1:] == ["2025-12-07T22:10:01.123Z,split,3,default,,['now']"]
    assert spout.emit.__self__.debug is None and bolt.emit.__self__.debug is None  # off: nothing called


def test_topology_debug_in_a_components_conf_samples_it_from_the_start(tmp_path: Path) -> None:
    fd, path = open_events(tmp_path)
    events = EventLog(fd, {"split": True}, wall=lambda: WALL)
    bolt = Bolt()
    events.attach("split", 3, bolt.emit)
    bolt.emit(["x"])
    events.close()
    assert read_lines(path) == ["2025-12-07T22:10:01.123Z,split,3,default,,['x']"]


def test_a_full_buffer_drops_and_counts_instead_of_waiting_for_the_file(tmp_path: Path) -> None:
    read, write = os.pipe()  # nobody reads: a disk that does not keep up
    os.set_blocking(write, False)
    events = EventLog(write, {"split": True}, capacity=5, flush_secs=3600)  # the writer never runs
    bolt = Bolt()
    events.attach("split", 3, bolt.emit)
    for i in range(20):
        bolt.emit([f"w{i}"])
    assert events.dropped == 15
    events.close()
    assert events.written == 5 and os.read(read, 65536).count(b"\n") == 5
    os.close(read)


def test_a_file_that_cannot_be_written_drops_lines_and_never_raises_into_the_emitter(tmp_path: Path) -> None:
    (tmp_path / "events.log").touch()
    events = EventLog(os.open(tmp_path / "events.log", os.O_RDONLY), {"split": True})  # every write fails
    bolt = Bolt()
    events.attach("split", 3, bolt.emit)
    bolt.emit(["a"])
    events.flush()
    bolt.emit(["b"])
    assert events.dropped == 2 and bolt.sent()
    events.close()
