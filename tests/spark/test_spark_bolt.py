"""The Spark bolt against a real Spark Connect server (one for the whole run).

Every test runs a topology in local mode, whose Spark bolts find the
process's server by themselves (no spark.remote).  Spouts replay what
fails; a generous message timeout keeps replays down to the ones the
tests cause, so results are checked for exactness *and* for duplicates.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import psutil
import pytest

from squall import Bolt, LocalCluster, Spout, Topology
from squall.spark import SparkBolt
from squall.spark.server import SERVER_CLASS
from squall.testing import poll_for

pytestmark = [
    pytest.mark.usefixtures("spark_server"),
    # pyspark warns each time a call ran out of retries (a dead server): expected here.
    pytest.mark.filterwarnings("ignore:.*RETRIES_EXCEEDED:UserWarning"),
]

SLOW = 180.0  # seconds any one wait may take on a busy 2-core machine


class Probe:
    """What components saw, kept outside the topology (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: set[int] = set()
        self.failed: list[int] = []
        self.sessions: list[dict[str, Any]] = []
        self.batches: list[tuple[int, int, bool]] = []  # (task, call number, succeeded)
        self.failed_batch_ids: list[int] = []
        self.downstream_failed: list[int] = []

    def add(self, name: str, item: Any) -> None:
        with self.lock:
            target = getattr(self, name)
            target.add(item) if isinstance(target, set) else target.append(item)


PROBES: dict[str, Probe] = {}


def probe_of(conf: dict[str, Any]) -> Probe:
    return PROBES[conf["test.probe"]]


@pytest.fixture
def probe(request: pytest.FixtureRequest) -> Any:
    name = request.node.name
    PROBES[name] = Probe()
    yield name, PROBES[name]
    PROBES.pop(name, None)


# -- components ---------------------------------------------------------------

def _example_classes(ex: ModuleType) -> dict[str, type]:
    """Subclasses of the example's components that report to the probe."""

    class ProbedEvents(ex.Events):
        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            super().initialize(conf, context)
            self.probe = probe_of(conf)
            self.rate = conf.get("test.rate")  # events per second, or as fast as possible
            self.started = time.monotonic()
            self.sent = 0

        def next_tuple(self) -> None:
            if self.rate and not self.replay and self.sent >= self.rate * (time.monotonic() - self.started):
                return
            self.sent += 1
            super().next_tuple()

        def ack(self, tup_id: Any) -> None:
            super().ack(tup_id)
            self.probe.add("acked", tup_id)

        def fail(self, tup_id: Any) -> None:
            super().fail(tup_id)
            self.probe.add("failed", tup_id)

    class ProbedEnrich(ex.EnrichAndAggregate):
        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            super().initialize(conf, context)
            self.probe = probe_of(conf)
            self.fail_call = conf.get("test.fail.call")
            self.calls = 0

        def setup_session(self, spark: Any) -> None:
            super().setup_session(spark)
            self.probe.add("sessions", {"task": self.context.task_id, "worker": self.context.worker,
                                        "url": self.sessions._url(), "session": id(spark)})

        def process_batch(self, df: Any) -> Any:
            self.calls += 1
            if self.calls == self.fail_call:
                ids = df.select("event_id").toArrow().column(0).to_pylist()
                for i in ids:
                    self.probe.add("failed_batch_ids", i)
                self.probe.add("batches", (self.context.task_id, self.calls, False))
                msg = f"injected failure in batch {self.calls}"
                raise RuntimeError(msg)
            result = super().process_batch(df)
            self.probe.add("batches", (self.context.task_id, self.calls, True))
            return result

    return {"events": ProbedEvents, "enrich": ProbedEnrich}


def example_topology(ex: ModuleType, par: int = 1) -> type[Topology]:
    classes = _example_classes(ex)
    specs = {
        "events": classes["events"].spec(),
        "enrich": classes["enrich"].spec(inputs=["events"], par=par),
        "write": ex.WriteResults.spec(inputs=["enrich"]),
    }
    return Topology.from_specs("ProbedSparkEnrich", specs, ex.SparkEnrich.config)


def run_example(ex: ModuleType, topology: Any, tmp_path: Path, probe_name: str, events: int,
                **conf: Any) -> tuple[LocalCluster, Any, Path]:
    out = tmp_path / "out"
    cluster = LocalCluster()
    runner = cluster.submit("spark-enrich", topology, {
        "example.dir": str(out), "example.events": events, "test.probe": probe_name,
        "topology.message.timeout.secs": 120, "spark.bolt.batch.size": 1000, **conf})
    return cluster, runner, out


def wait_all_acked(probe: Probe, events: int, runner: Any) -> None:
    def done() -> bool:
        fatal = [e for e in runner.errors if e.fatal]
        assert not fatal, fatal[0].trace
        return len(probe.acked) == events

    poll_for(done, SLOW, f"all {events} events to be acked")


def assert_exact(ex: ModuleType, out: Path, events: int) -> None:
    totals, ids = ex.read_totals(out)
    assert sorted(ids) == list(range(events)), "every event counted exactly once"
    assert totals == ex.reference_totals(ex.make_events(events, 1000), 1000)


# -- the example pipeline -----------------------------------------------------

def test_example_pipeline_matches_the_plain_python_reference(enrich_example: ModuleType, tmp_path: Path,
                                                             probe: Any) -> None:
    # Given the example topology, 6,000 events, batches of up to 1,000
    name, _p = probe
    cluster, runner, out = run_example(enrich_example, enrich_example.SparkEnrich, tmp_path, name, 6000)
    with cluster:
        # When every event was written out
        poll_for(lambda: len(set(enrich_example.read_totals(out)[1])) == 6000 or runner.errors, SLOW,
                 "all events written")
        poll_for(lambda: runner.stats()["events"]["acked"] == 6000, SLOW, "all events acked")
        stats = runner.stats()
    # Then the totals per (window, region) are exactly the plain-Python ones
    assert not runner.errors, runner.errors[0].trace
    assert_exact(enrich_example, out, 6000)
    assert stats["events"]["failed"] == 0
    assert stats["enrich"]["acked"] == 6000


def test_a_failing_batch_fails_its_tuples_which_replay(enrich_example: ModuleType, tmp_path: Path,
                                                       probe: Any) -> None:
    # Given a process_batch that raises in its third batch
    name, p = probe
    cluster, runner, out = run_example(enrich_example, example_topology(enrich_example), tmp_path, name, 6000,
                                       **{"test.fail.call": 3})
    with cluster:
        wait_all_acked(p, 6000, runner)
        errors = list(runner.errors)
    # Then exactly that batch's events failed (and were replayed)
    assert p.failed_batch_ids, "the third batch ran"
    assert sorted(p.failed) == sorted(p.failed_batch_ids)
    # and the error was reported, not fatal
    assert [e for e in errors if "injected failure in batch 3" in e.error and not e.fatal]
    # and the bolt went on: batches after the failed one succeeded
    assert [n for _task, n, ok in p.batches if ok and n > 3]
    # and the results are still exact, nothing counted twice
    assert_exact(enrich_example, out, 6000)


def test_spark_bolts_in_two_workers_share_one_server(enrich_example: ModuleType, tmp_path: Path,
                                                     probe: Any, spark_server: Any) -> None:
    # Given two workers, each with a Spark bolt task
    name, p = probe
    topology = example_topology(enrich_example, par=2)
    cluster, runner, out = run_example(enrich_example, topology, tmp_path, name, 6000,
                                       **{"topology.workers": 2, "spark.bolt.batch.size": 500})
    with cluster:
        wait_all_acked(p, 6000, runner)
    # Then both tasks, in different workers, held sessions on the same server
    workers = {s["worker"] for s in p.sessions}
    tasks = {s["task"] for s in p.sessions}
    assert len(workers) == 2 and len(tasks) == 2, p.sessions
    assert {s["url"] for s in p.sessions} == {spark_server.url}
    assert {t for t, _n, ok in p.batches if ok} == tasks, "both tasks processed batches"
    # and this process runs exactly one Spark JVM: the server
    jvms = [c for c in psutil.Process(os.getpid()).children(recursive=True)
            if any(SERVER_CLASS in part for part in _cmdline(c))]
    assert [j.pid for j in jvms] == [spark_server.pid]
    assert_exact(enrich_example, out, 6000)


@pytest.mark.timeout(400)
def test_killing_the_server_mid_stream_loses_nothing(enrich_example: ModuleType, tmp_path: Path,
                                                     probe: Any, spark_server: Any) -> None:
    # Given a paced stream going through the Spark bolt
    name, p = probe
    restarts = spark_server.restarts
    cluster, runner, out = run_example(enrich_example, example_topology(enrich_example), tmp_path, name, 8000,
                                       **{"test.rate": 800, "spark.bolt.batch.size": 500})
    with cluster:
        poll_for(lambda: len([b for b in p.batches if b[2]]) >= 2, SLOW, "two batches through Spark")
        # When the server's JVM is killed mid-stream
        old_pid = spark_server.pid
        spark_server.kill()
        # Then it comes back (a new JVM, same address)
        poll_for(lambda: spark_server.restarts > restarts and spark_server.ready, SLOW,
                 "the server to restart")
        assert spark_server.pid != old_pid
        # and every event is still processed
        wait_all_acked(p, 8000, runner)
    # The bolt opened a new session, whose setup rebuilt the cached table
    assert len(p.sessions) >= 2
    assert len({s["session"] for s in p.sessions}) == len(p.sessions)
    # and nothing was lost or counted twice
    assert_exact(enrich_example, out, 8000)


# -- anchoring ----------------------------------------------------------------

class Numbers(Spout):
    """0..n-1 with message ids, replayed on failure."""

    outputs = ["id", "v"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.probe = probe_of(conf)
        self.todo = list(range(conf["test.n"] - 1, -1, -1))

    def next_tuple(self) -> None:
        if self.todo:
            i = self.todo.pop()
            self.emit([i, float(i)], tup_id=i)

    def ack(self, tup_id: Any) -> None:
        self.probe.add("acked", tup_id)

    def fail(self, tup_id: Any) -> None:
        self.probe.add("failed", tup_id)
        self.todo.append(tup_id)


class Doubler(SparkBolt):
    """A narrow map that keeps __squall_row: anchored row by row."""

    schema = "id bigint, v double"
    outputs = ["id", "v2"]

    def process_batch(self, df: Any) -> Any:
        return df.selectExpr("id", "v * 2 AS v2", "__squall_row")


class DoublerWithoutRows(Doubler):
    """The same map, dropping __squall_row: anchored to the whole batch."""

    def process_batch(self, df: Any) -> Any:
        return df.selectExpr("id", "v * 2 AS v2")


class FailOnce(Bolt):
    """Fails the first tuple it sees for id test.bad; acks everything else."""

    outputs: list[str] = []
    auto_ack = False

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.probe = probe_of(conf)
        self.bad = conf["test.bad"]
        self.done = False

    def process(self, tup: Any) -> None:
        assert tup.values.v2 == tup.values.id * 2.0
        if tup.values.id == self.bad and not self.done:
            self.done = True
            self.probe.add("downstream_failed", tup.values.id)
            self.fail(tup)
        else:
            self.ack(tup)


def _run_anchoring(spark_bolt: type, probe: Any) -> Probe:
    name, p = probe
    topology = Topology.from_specs("Anchoring", {
        "numbers": Numbers.spec(), "spark": spark_bolt.spec(inputs=["numbers"]),
        "check": FailOnce.spec(inputs=["spark"])})
    with LocalCluster() as cluster:
        runner = cluster.submit("anchoring", topology, {
            "test.probe": name, "test.n": 30, "test.bad": 15, "topology.message.timeout.secs": 120,
            # Batches of 10 by size: 0-9, 10-19, 20-29 (the age only flushes replays).
            "spark.bolt.batch.size": 10, "spark.bolt.batch.max.size": 10, "spark.bolt.batch.ms": 1500})
        wait_all_acked(p, 30, runner)
    return p


def test_rows_keeping_the_row_column_are_anchored_to_their_own_input(probe: Any) -> None:
    # When the output row of input 15 fails downstream
    p = _run_anchoring(Doubler, probe)
    # Then only input 15's tree fails
    assert p.downstream_failed == [15]
    assert p.failed == [15]


def test_rows_without_the_row_column_are_anchored_to_the_whole_batch(probe: Any) -> None:
    # When the output row of input 15 fails downstream
    p = _run_anchoring(DoublerWithoutRows, probe)
    # Then every input of its batch (10-19) fails, and only those
    assert p.downstream_failed == [15]
    assert sorted(p.failed) == list(range(10, 20))


def _cmdline(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except psutil.Error:
        return []


# -- when batches go, when inputs are acked -----------------------------------

class Sink(Bolt):
    outputs: list[str] = []

    def process(self, tup: Any) -> None:
        pass


@pytest.mark.parametrize("how", ["age", "tick"])
def test_a_partial_batch_is_flushed_by_age_or_by_a_tick(probe: Any, how: str) -> None:
    # Given 5 tuples and batches of 1,000: only the age limit or a tick can send them
    name, p = probe
    spark_config = {"topology.tick.tuple.freq.secs": 0.3} if how == "tick" else {}
    topology = Topology.from_specs("Flush", {
        "numbers": Numbers.spec(), "spark": Doubler.spec(inputs=["numbers"], config=spark_config),
        "sink": Sink.spec(inputs=["spark"])})
    with LocalCluster() as cluster:
        runner = cluster.submit("flush", topology, {
            "test.probe": name, "test.n": 5, "topology.message.timeout.secs": 120,
            "spark.bolt.batch.size": 1000, "spark.bolt.batch.ms": 300 if how == "age" else 600_000})
        # Then they go through Spark and are acked
        wait_all_acked(p, 5, runner)
        assert runner.stats()["sink"]["executed"] == 5


class Gate:
    """Holds every Spark job until the test opens it."""

    opened = threading.Event()
    entered = threading.Event()


class GatedDoubler(Doubler):
    def process_batch(self, df: Any) -> Any:
        Gate.entered.set()
        assert Gate.opened.wait(SLOW)
        return super().process_batch(df)


def test_inputs_are_acked_only_after_the_spark_job_succeeded(probe: Any) -> None:
    # Given a Spark job held open
    name, p = probe
    Gate.opened.clear()
    Gate.entered.clear()
    topology = Topology.from_specs("Gated", {
        "numbers": Numbers.spec(), "spark": GatedDoubler.spec(inputs=["numbers"]),
        "sink": Sink.spec(inputs=["spark"])})
    with LocalCluster() as cluster:
        runner = cluster.submit("gated", topology, {
            "test.probe": name, "test.n": 20, "topology.message.timeout.secs": 120,
            "spark.bolt.batch.size": 20})
        try:
            assert Gate.entered.wait(SLOW)
            # When the job is running, the executor keeps serving (its queue drains) but nothing is acked
            poll_for(lambda: runner.idle(), SLOW, "the topology to go idle around the running job")
            assert p.acked == set() and p.failed == []
            assert runner.stats()["sink"]["executed"] == 0
        finally:
            Gate.opened.set()
        # Then once the job succeeds, everything is emitted and acked
        wait_all_acked(p, 20, runner)
        assert p.failed == []
