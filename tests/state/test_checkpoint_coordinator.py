"""The checkpoint coordinator's state machine, driven by a FakeClock."""

from __future__ import annotations

import itertools

import pytest

from squall.clock import FakeClock
from squall.state.checkpoint import (
    COMMIT,
    COMMITTED,
    COMMITTING,
    INIT,
    PREPARE,
    PREPARING,
    ROLLBACK,
    CheckpointCoordinator,
    Emit,
    Restore,
    Save,
)

pytestmark = pytest.mark.timeout(10)


def make(record=None, interval=1.0):
    clock = FakeClock()
    ids = itertools.count(100)
    return clock, CheckpointCoordinator(record, interval, clock.now(), lambda: next(ids))


def emitted(instructions):
    return [(i.action, i.txid) for i in instructions if isinstance(i, Emit)]


def saved(instructions):
    return [(i.record["txid"], i.record["phase"]) for i in instructions if isinstance(i, Save)]


def test_a_fresh_start_initializes_then_checkpoints_every_interval():
    clock, core = make()
    # Given nothing stored: the first step resets every bolt to the empty state
    first = core.step(clock.now(), lambda: 0)
    assert first[0] == Restore(None)
    assert emitted(first) == [(INIT, 0)]
    assert not core.may_emit_data
    assert core.step(clock.now()) == []  # one barrier in flight at a time
    assert core.ack(first[1].barrier, clock.now()) == []
    assert core.may_emit_data
    # When less than the interval passed, nothing; then a prepare, stored first
    clock.advance(0.5)
    assert core.step(clock.now()) == []
    clock.advance(0.6)
    prep = core.step(clock.now(), lambda: 42)
    assert saved(prep) == [(1, PREPARING)] and emitted(prep) == [(PREPARE, 1)]
    assert prep[0].record["prepared"] == 42
    # Then its ack stores committing and emits the commit; the commit's ack stores committed
    com = core.ack(prep[1].barrier, clock.now())
    assert saved(com) == [(1, COMMITTING)] and emitted(com) == [(COMMIT, 1)]
    done = core.ack(com[1].barrier, clock.now())
    assert saved(done) == [(1, COMMITTED)]
    assert done[0].record["position"] == 42 and core.committed_txid == 1


def test_a_failed_prepare_rolls_back_to_the_committed_position():
    clock, core = make({"txid": 3, "phase": COMMITTED, "position": 30, "prepared": None})
    init = core.step(clock.now())
    assert init[0] == Restore(30) and emitted(init) == [(INIT, 3)]
    core.ack(init[1].barrier, clock.now())
    clock.advance(1.0)
    prep = core.step(clock.now(), lambda: 40)
    # When the prepare tree fails (a worker died)
    assert core.fail(prep[1].barrier) == []
    assert not core.may_emit_data
    # Then a rollback to txid 3 goes out, the spout rewound to 30
    rb = core.step(clock.now(), lambda: 99)
    assert rb[0] == Restore(30) and emitted(rb) == [(ROLLBACK, 3)]
    # a rollback that fails is retried
    core.fail(rb[1].barrier)
    rb2 = core.step(clock.now())
    assert emitted(rb2) == [(ROLLBACK, 3)] and rb2[1].barrier != rb[1].barrier
    after = core.ack(rb2[1].barrier, clock.now())
    assert saved(after) == [(3, COMMITTED)] and core.may_emit_data
    # and the next checkpoint is txid 4 again
    clock.advance(1.0)
    assert emitted(core.step(clock.now(), lambda: 35)) == [(PREPARE, 4)]


def test_a_restart_between_prepare_and_commit_rolls_back():
    clock, core = make({"txid": 5, "phase": PREPARING, "position": 50, "prepared": 60})
    rb = core.step(clock.now())
    assert rb[0] == Restore(50) and emitted(rb) == [(ROLLBACK, 4)]
    assert saved(core.ack(rb[1].barrier, clock.now())) == [(4, COMMITTED)]
    assert core.record["position"] == 50


def test_a_restart_while_committing_finishes_the_commit_first():
    clock, core = make({"txid": 5, "phase": COMMITTING, "position": 50, "prepared": 60})
    com = core.step(clock.now())
    assert emitted(com) == [(COMMIT, 5)] and not any(isinstance(i, Restore) for i in com)
    done = core.ack(com[0].barrier, clock.now())
    assert saved(done) == [(5, COMMITTED)] and done[0].record["position"] == 60
    # still recovering: the reset that follows restores the position committed with txid 5
    init = core.step(clock.now())
    assert init[0] == Restore(60) and emitted(init) == [(INIT, 5)]


def test_acks_and_fails_of_abandoned_barriers_change_nothing():
    clock, core = make()
    init = core.step(clock.now())
    assert core.ack(12345, clock.now()) == [] and core.fail(12345) == []
    assert core.in_flight == init[1]


def test_a_store_failure_aborts_into_recovery():
    clock, core = make()
    core.ack(core.step(clock.now())[1].barrier, clock.now())
    clock.advance(2)
    core.step(clock.now())
    core.abort()
    assert core.recovering and core.in_flight is None
    assert emitted(core.step(clock.now())) == [(ROLLBACK, 0)]


@pytest.mark.parametrize("bad", [{"txid": -1, "phase": COMMITTED}, {"txid": 1, "phase": "done"}, [1]])
def test_a_malformed_record_is_refused(bad):
    with pytest.raises(ValueError, match="not a checkpoint record"):
        make(bad)


def test_a_non_positive_interval_is_refused():
    with pytest.raises(ValueError, match="interval"):
        make(interval=0)
