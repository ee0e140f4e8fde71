"""Fencing of the transactional state (squall.cluster.fence): epochs that
only grow, writes that a superseded coordinator cannot make, write-once
metadata, and holders that vanish with their coordinator -- in memory and in a
real (embedded) ZooKeeper, where two clients stand for two worker processes."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any
from uuid import uuid4

import pytest
import structlog

from squall import config as config_mod
from squall.clock import FakeClock
from squall.cluster.fence import Fence, FencedOut
from squall.cluster.fenced_state import COORDINATOR, CURRENT_TXID, MemoryBackend
from squall.cluster.transactional_state import ZooKeeperBackend
from squall.cluster.zookeeper import DevZookeeper, start_client
from squall.metrics.registry import MetricsRegistry
from squall.transactional.lease import LOOK_SECS, EpochLease
from tests.helpers import keyring_conf


@pytest.fixture(params=["memory", "zookeeper"])
def worker_state(request: pytest.FixtureRequest) -> Iterator[Callable[[str], Any]]:
    """``worker_state(subdir)``: the state of one transactional id as a new worker
    process would open it (in ZooKeeper: a client and session of its own)."""
    tid = f"tid-{uuid4().hex[:8]}"
    if request.param == "memory":
        backend = MemoryBackend()
        yield lambda subdir: backend.open(tid, subdir)
        return
    zookeeper: DevZookeeper = request.getfixturevalue("zookeeper")
    backends: list[ZooKeeperBackend] = []

    def open_state(subdir: str) -> Any:
        client = start_client(config_mod.merge({"storm.zookeeper.servers": ["127.0.0.1"],
                                                "storm.zookeeper.port": zookeeper.port,
                                                **keyring_conf(zookeeper.data_dir.parent)}))
        backend = ZooKeeperBackend(client, "/fence-tests", request_timeout=10.0)
        backends.append(backend)
        return backend.open(tid, subdir)

    yield open_state
    for backend in backends:
        backend.close()


def test_each_claim_is_a_higher_epoch_whoever_claims(worker_state: Callable[[str], Any]) -> None:
    old, new = worker_state(COORDINATOR), worker_state(COORDINATOR)
    assert old.epoch() == 0
    assert old.claim_epoch() == 1
    assert new.claim_epoch() == 2
    assert old.claim_epoch() == 3
    assert new.epoch() == old.epoch() == 3


def test_concurrent_claims_never_share_an_epoch(worker_state: Callable[[str], Any]) -> None:
    states = [worker_state(COORDINATOR) for _ in range(4)]
    claimed: list[int] = []
    lock = threading.Lock()

    def claim(state: Any) -> None:
        for _ in range(5):
            epoch = state.claim_epoch()
            with lock:
                claimed.append(epoch)

    threads = [threading.Thread(target=claim, args=(s,)) for s in states]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(claimed) == list(range(1, 21))


def test_a_superseded_coordinator_writes_nothing(worker_state: Callable[[str], Any]) -> None:
    # Given a coordinator that claimed epoch 1 and wrote the current txid under it
    old = worker_state(COORDINATOR)
    fence = Fence(old.claim_epoch())
    old.set_data(CURRENT_TXID, 7, fence)
    old.create("meta/7", 4, fence)
    # When another one claims an epoch (a replacement worker started)
    new = worker_state(COORDINATOR)
    new.claim_epoch()
    # Then none of the old one's writes is made: set, create or delete
    with pytest.raises(FencedOut, match="epoch 1 was superseded by epoch 2"):
        old.set_data(CURRENT_TXID, 9, fence)
    with pytest.raises(FencedOut):
        old.create("meta/8", 4, fence)
    with pytest.raises(FencedOut):
        old.delete("meta/7", fence)
    with pytest.raises(FencedOut):
        old.check(fence)
    assert new.get_data(CURRENT_TXID) == 7
    assert new.list("meta") == ["7"]
    # and unfenced reads and writes are unaffected
    old.set_data("scratch", 1)
    assert new.get_data("scratch") == 1


def test_a_commit_fence_holds_only_for_the_current_txid(worker_state: Callable[[str], Any]) -> None:
    coordinator = worker_state(COORDINATOR)
    epoch = coordinator.claim_epoch()
    coordinator.set_data(CURRENT_TXID, 5, Fence(epoch))
    emitter = worker_state("user")
    # A commit of txid 5 by the current epoch may write
    emitter.set_data("partition_0", {"txid": 5}, Fence(epoch, 5))
    # one delivered late, after txid 5 committed and the current txid moved on, may not
    coordinator.set_data(CURRENT_TXID, 6, Fence(epoch))
    with pytest.raises(FencedOut, match=r"txid 5 is not the transaction to commit \(the current txid is 6\)"):
        emitter.set_data("partition_0", {"txid": 5, "late": True}, Fence(epoch, 5))
    # nor one of a superseded epoch, even for the current txid
    coordinator.claim_epoch()
    with pytest.raises(FencedOut):
        emitter.check(Fence(epoch, 6))
    assert emitter.get_data("partition_0") == {"txid": 5}


def test_create_is_write_once(worker_state: Callable[[str], Any]) -> None:
    first, second = worker_state("user"), worker_state("user")
    assert first.create("partition_0/3", {"lo": 0, "hi": 40}) == {"lo": 0, "hi": 40}
    assert second.create("partition_0/3", {"lo": 0, "hi": 55}) == {"lo": 0, "hi": 40}
    assert second.get_data("partition_0/3") == {"lo": 0, "hi": 40}
    # a stored null is a value: the default is only for a path that is absent
    first.create("partition_0/4", None)
    assert second.get_data("partition_0/4", "absent") is None
    assert second.get_data("partition_0/5", "absent") == "absent"


def test_an_epoch_is_held_until_released_or_its_process_is_gone(worker_state: Callable[[str], Any]) -> None:
    old, new = worker_state(COORDINATOR), worker_state(COORDINATOR)
    one = old.claim_epoch()
    assert new.epoch_held(one)
    old.release_epoch(one)
    assert not new.epoch_held(one)
    two = old.claim_epoch()
    assert new.epoch_held(two)
    assert not new.epoch_held(two + 1)


def test_an_epochs_holder_goes_with_its_zookeeper_session(zookeeper: DevZookeeper) -> None:
    # A worker SIGKILLed never releases its epoch: its session's end does
    conf = config_mod.merge({"storm.zookeeper.servers": ["127.0.0.1"], "storm.zookeeper.port": zookeeper.port,
                             **keyring_conf(zookeeper.data_dir.parent)})
    tid = f"tid-{uuid4().hex[:8]}"
    dying = ZooKeeperBackend(start_client(conf), "/fence-tests")
    watching = ZooKeeperBackend(start_client(conf), "/fence-tests")
    try:
        epoch = dying.open(tid, COORDINATOR).claim_epoch()
        assert watching.open(tid, COORDINATOR).epoch_held(epoch)
        dying.close()
        assert not watching.open(tid, COORDINATOR).epoch_held(epoch)
    finally:
        dying.close()
        watching.close()


# -- EpochLease: the shell the coordinator and the checkpoint spout share ------------------


def test_a_lease_stands_by_when_superseded_and_takes_over_once_the_newer_one_is_gone() -> None:
    backend, clock, metrics = MemoryBackend(), FakeClock(), MetricsRegistry()
    old = EpochLease(backend.open("tid", COORDINATOR), clock, structlog.get_logger(), metrics,
                     "test coordinator")

    def shown() -> tuple[Any, Any, Any]:
        snap = metrics.snapshot()
        return snap["gauges"]["epoch"], snap["gauges"]["standby"], snap["counters"]["superseded"]

    assert shown() == (0, 1, 0)
    fence = old.claim()
    assert (fence.epoch, old.standby, old.holds()) == (1, False, True)
    assert shown() == (1, 0, 0)
    # When a newer instance claims, the old one's next check finds it out and it stands by
    newer = backend.open("tid", COORDINATOR)
    newer.claim_epoch()
    assert not old.holds()
    assert old.standby and shown() == (1, 1, 1)
    # While the newer one holds its epoch, the old one may not take over, and looks once a LOOK_SECS
    clock.advance(LOOK_SECS)
    assert not old.may_take_over()
    newer.release_epoch(2)
    assert not old.may_take_over()  # too soon to look again
    clock.advance(LOOK_SECS)
    assert old.may_take_over()
    assert old.claim().epoch == 3 and not old.standby
    # and a release lets go of the epoch it holds
    old.release()
    assert not newer.epoch_held(3)
