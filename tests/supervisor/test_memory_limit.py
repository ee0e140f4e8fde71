"""The supervisor's memory-limit decision as a pure core: samples of a worker's resident
memory in, with the time from a fake clock; a kill out once it stays over its limit."""

from __future__ import annotations

from squall.clock import FakeClock
from squall.supervisor.daemon import capacity, components_of
from squall.supervisor.memory import MIB, MemoryWatch, OverLimit

PORT = 6700
LIMIT = 200.0


def mb(n: float) -> int:
    return int(n * MIB)


def test_a_worker_over_its_limit_for_enough_samples_in_a_row_is_to_be_killed() -> None:
    clock = FakeClock()
    watch = MemoryWatch(3)
    assert watch.sample(PORT, "L1", mb(250), LIMIT, clock.now()) is None
    clock.advance(3)
    assert watch.sample(PORT, "L1", mb(260), LIMIT, clock.now()) is None
    clock.advance(3)
    over = watch.sample(PORT, "L1", mb(270), LIMIT, clock.now())
    assert isinstance(over, OverLimit)
    assert over.port == PORT and round(over.rss_mb) == 270 and over.limit_mb == LIMIT
    assert over.samples == 3 and over.over_secs == 6
    assert "270 MB resident, limit 200 MB" in over.reason() and "killed and restarted" in over.reason()


def test_one_sample_under_the_limit_starts_the_count_again() -> None:
    watch = MemoryWatch(3)
    for t, rss in enumerate([250, 250, 150, 250, 250]):
        assert watch.sample(PORT, "L1", mb(rss), LIMIT, float(t)) is None
    assert watch.sample(PORT, "L1", mb(250), LIMIT, 5.0) is not None


def test_exactly_the_limit_is_not_over_it() -> None:
    watch = MemoryWatch(1)
    assert watch.sample(PORT, "L1", mb(LIMIT), LIMIT, 0.0) is None
    assert watch.sample(PORT, "L1", mb(LIMIT) + MIB, LIMIT, 1.0) is not None


def test_a_new_launch_starts_afresh() -> None:
    watch = MemoryWatch(2)
    assert watch.sample(PORT, "L1", mb(300), LIMIT, 0.0) is None
    assert watch.sample(PORT, "L2", mb(300), LIMIT, 1.0) is None  # the restarted worker: its first sample
    assert watch.sample(PORT, "L2", mb(300), LIMIT, 2.0) is not None


def test_after_a_kill_the_count_starts_again() -> None:
    watch = MemoryWatch(2)
    watch.sample(PORT, "L1", mb(300), LIMIT, 0.0)
    assert watch.sample(PORT, "L1", mb(300), LIMIT, 1.0) is not None
    assert watch.sample(PORT, "L1", mb(300), LIMIT, 2.0) is None


def test_no_limit_never_kills_and_slots_are_counted_apart() -> None:
    watch = MemoryWatch(1)
    assert watch.sample(PORT, "L1", mb(10_000), None, 0.0) is None
    watch = MemoryWatch(2)
    watch.sample(PORT, "L1", mb(300), LIMIT, 0.0)
    assert watch.sample(PORT + 1, "L9", mb(300), LIMIT, 1.0) is None
    assert watch.sample(PORT, "L1", mb(300), LIMIT, 1.0) is not None


def test_forget_drops_a_slots_count() -> None:
    watch = MemoryWatch(2)
    watch.sample(PORT, "L1", mb(300), LIMIT, 0.0)
    watch.forget(PORT)
    assert watch.sample(PORT, "L1", mb(300), LIMIT, 1.0) is None


def test_a_nodes_capacity_is_its_conf_or_the_machine() -> None:
    assert capacity({"supervisor.memory.capacity.mb": 2048, "supervisor.cpu.capacity": 150}) == {
        "memory_mb": 2048.0, "cpu": 150.0}
    machine = capacity({"supervisor.cpu.cores": [0, 1, 2]})
    assert machine["cpu"] == 300.0 and machine["memory_mb"] > 100


def test_a_killed_workers_components_are_named_system_ones_last() -> None:
    from tests.helpers import IdlePipeline

    want = {"topology": IdlePipeline.definition().to_dict(), "conf": {"topology.workers": 1},
            "executors": [[1, 1], [2, 2], [3, 3]]}
    assert components_of(want) == ["numbers", "sink", "__acker"]
    assert components_of({"topology": {}, "executors": [[1, 1]]}) == [""]
