"""Trident's exactly once, chaos-tested (issue 31): a Trident word count on a real secure
cluster (ZooKeeper, nimbus, 2 supervisors, 3 workers) keeps its counts in an opaque Redis
map state, and they stay exact while workers are SIGKILLed, a whole node dies and comes
back, nimbus dies and ZooKeeper restarts; its DRPC stream answers between the blows and
after, each answer a count the state really held.

The batches are a function of their txid (tests/cluster/topologies/trident_wordcount.py),
so the exact counts after batches 1..T are known for every T; once the test stops the
spout (its batches turn empty) and the last batch with sentences has committed, the state
must hold exactly those of the last such T."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from squall.contrib.redis.devserver import DevRedis
from squall.contrib.redis.trident import RedisBackingMap
from squall.drpc import DRPCClient, DRPCExecutionError
from squall.testing import poll_for, wait_for_progress
from squall.transactional.output import coordinator_name
from squall.trident import StateType
from tests.cluster.conftest import TOPOLOGIES, nimbus_answers, squall_cli, worker_logs, workers_running
from tests.cluster.topologies.trident_wordcount import NAMESPACE, VOCAB, expected, sentences

TOPOLOGY = str(TOPOLOGIES / "trident_wordcount.py")
NAME = "tchaos"
STATE_COMPONENT = "b-1"  # the persistent aggregate's partitions (the group that commits)
QUERIED = ["w0", "w7", "w23"]  # words whose counts DRPC is asked while the blows fall

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[DevRedis]:
    server = DevRedis(tmp_path / "redis")
    server.start()
    yield server
    server.stop()


class State:
    """The opaque map state in Redis, read as a user would; and the spout's own records."""

    def __init__(self, url: str, directory: Path) -> None:
        self.backing = RedisBackingMap(url, NAMESPACE, StateType.OPAQUE)
        self.dir = directory

    def values(self) -> dict[str, Any]:
        """word -> its OpaqueValue (curr, prev, txid)."""
        return {key[0]: value for key, value in self.backing.items()}

    def words(self) -> int:
        return sum(v.curr for v in self.values().values())

    def record(self, name: str) -> int:
        path = self.dir / name
        return int(path.read_text()) if path.exists() else 0

    def close(self) -> None:
        self.backing.close()


class Answers:
    """DRPC answers for single words, each checked to be that word's exact count after some
    whole number of batches, and never smaller than the one before."""

    def __init__(self, client: DRPCClient) -> None:
        self.client = client
        self.last: dict[str, int] = {}

    def ask(self, args: str) -> tuple[int] | None:
        """``words(args)``, in a tuple (truthy even when it is 0); None when it was not answered."""
        try:
            answer = json.loads(self.client.execute("words", args))
        except DRPCExecutionError:  # timed out or failed: a worker on its path is away
            return None
        return (int(answer[0][0]),)

    def answer(self, args: str, when: str) -> int:
        """``words(args)``, asked again until it is answered."""
        count, = poll_for(lambda: self.ask(args), timeout=90, message=f"DRPC answering {when}")
        return int(count)

    def check(self, when: str) -> None:
        """Every queried word answered, each answer plausible."""
        for word in QUERIED:
            count = self.answer(word, when)
            assert count >= self.last.get(word, 0), f"{word}: {count} after {self.last[word]} ({when})"
            assert count in cumulative(word, count), (
                f"DRPC answered {word}={count} {when}: no number of batches counts it so")
            self.last[word] = count


def cumulative(word: str, up_to: int) -> set[int]:
    """``word``'s exact counts after batches 1..t, for every t, up to ``up_to``."""
    out, n, txid = {0}, 0, 0
    while n < up_to:
        txid += 1
        n += sum(s.split().count(word) for s in sentences(txid))
        out.add(n)
    return out


def test_trident_word_count_in_redis_stays_exact_through_chaos(make_cluster: Any, redis_server: DevRedis,
                                                               tmp_path: Path, request: Any) -> None:
    # Given a secure cluster of 2 nodes, a Redis, and the Trident word count on 3 workers
    # whose state partitions keep opaque values in Redis
    cluster = make_cluster(supervisors=2, slots=2, conf={"drpc.request.timeout.secs": 5})
    directory = tmp_path / "tchaos"
    directory.mkdir()
    state = State(redis_server.url, directory)
    request.addfinalizer(state.close)
    squall_cli(cluster, "submit", TOPOLOGY, "--name", NAME, "--conf", f"redis.url={redis_server.url}",
               "--conf", f"squall.test.dir={directory}", "--conf", "topology.workers=3",
               "--conf", "topology.message.timeout.secs=5")
    poll_for(lambda: len(cluster.worker_pids()) == 3, timeout=60, message="3 workers up")

    def progress(message: str, timeout: float = 60) -> None:
        before = state.words()
        poll_for(lambda: state.words() > before, timeout=timeout, message=message)

    with DRPCClient(cluster.conf) as client:
        answers = Answers(client)
        progress("first commits")
        answers.check("at the start")

        # When the worker coordinating the batches is SIGKILLed (its replacement replays the
        # batch in flight from the metadata in ZooKeeper)
        coordinating = workers_running(cluster, NAME, lambda c: c == coordinator_name("chaos-sentences"))
        stateful = workers_running(cluster, NAME, lambda c: c == STATE_COMPONENT)
        slot, pid = min(coordinating.items())
        kill_worker(cluster, slot, pid)
        progress("commits after the coordinating worker was killed")
        answers.check("after the coordinating worker was killed")
        # and one holding state partitions freezes (SIGSTOP) until the batch it holds times
        # out and is replayed (other partitions may have written it already), then is SIGKILLed
        others = sorted(set(stateful.items()) - set(coordinating.items()))
        assert others, f"every worker with state partitions coordinates too: {stateful}"
        slot, pid = others[0]
        replays = worker_logs(cluster).count("transactions replayed")
        os.kill(pid, signal.SIGSTOP)
        try:
            poll_for(lambda: worker_logs(cluster).count("transactions replayed") > replays, timeout=60,
                     message="the coordinator replaying the batch the frozen worker held")
        finally:
            os.kill(pid, signal.SIGKILL)
        wait_restarted(cluster, slot, pid)
        progress("commits after the frozen worker was killed")
        answers.check("after the frozen worker was killed")

        # and a whole node dies with its workers, and comes back
        busiest = max(range(2), key=lambda i: sum(1 for node, _ in stateful if node == i))
        cluster.kill_supervisor_node(busiest)
        cluster.start_supervisor(busiest)
        progress("commits after a node died and came back", timeout=90)
        answers.check("after a node died and came back")

        # and nimbus dies: the count goes on, and DRPC answers, without it
        cluster.kill_process("nimbus-0")
        progress("commits without nimbus")
        answers.check("while nimbus is down")
        cluster.start_nimbus(0)
        poll_for(lambda: nimbus_answers(cluster), timeout=60, message="nimbus back")

        # and ZooKeeper (which holds the batches' metadata) goes down until a worker feels
        # it, and comes back
        retried = worker_logs(cluster).count("retried")
        cluster.zk.stop()
        poll_for(lambda: worker_logs(cluster).count("retried") > retried, timeout=30,
                 message="a worker finding ZooKeeper gone")
        cluster.start_zookeeper()
        progress("commits after ZooKeeper restarted", timeout=90)
        answers.check("after ZooKeeper restarted")

        # Then, once the spout stops (its batches turn empty) and every batch with sentences
        # has committed, the state holds exactly the counts of batches 1..T
        (directory / "stop").touch()
        stopped_at = poll_for(lambda: state.record("stopped-at"), timeout=60, message="the spout stopping")
        wait_for_progress(lambda: state.record("committed"), stopped_at, stall=60,
                          message=f"batches up to {stopped_at} committed")
        last = stopped_at - 1
        values = state.values()
        counts = {word: value.curr for word, value in values.items()}
        want = dict(expected(last))
        wrong = {w: (counts.get(w), want.get(w)) for w in sorted(set(counts) | set(want))
                 if counts.get(w) != want.get(w)}
        assert not wrong, f"after batches 1..{last}, word: (counted, exact): {wrong}"
        assert max(v.curr_txid for v in values.values()) <= last, "a value written by an empty batch"
        # and DRPC answers exactly that, for single words and for all of them at once
        for word in QUERIED:
            assert answers.answer(word, "after the chaos") == want[word], word
        assert answers.answer(" ".join(VOCAB), "after the chaos") == sum(want.values())


def kill_worker(cluster: Any, slot: tuple[int, int], pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    wait_restarted(cluster, slot, pid)


def wait_restarted(cluster: Any, slot: tuple[int, int], pid: int) -> None:
    poll_for(lambda: cluster.worker_pids().get(slot) not in (None, pid), timeout=30,
             message=f"worker on {slot} restarted")



