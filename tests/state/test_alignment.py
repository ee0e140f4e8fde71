"""Barrier alignment for one bolt task (the pure core)."""

from __future__ import annotations

import pytest

from squall.state.alignment import BarrierAligner, Complete, Fail, Process, Reset
from squall.state.checkpoint import COMMIT, INIT, PREPARE, ROLLBACK

pytestmark = pytest.mark.timeout(10)

A, B, SPOUT = ("a", 1), ("b", 2), ("spout", 9)


def ready(hold=True):
    core = BarrierAligner([A, B], hold_until_initialized=hold)
    core.barrier(A, 1, INIT, 0, "iA")
    out = core.barrier(B, 1, INIT, 0, "iB")
    assert out == [Complete(INIT, 0, 1, ["iA", "iB"], True)]
    return core


def test_an_input_that_delivered_the_barrier_waits_for_the_others():
    core = ready()
    assert core.data(A, "a1") == [Process("a1")]
    assert core.barrier(A, 2, PREPARE, 1, "pA") == []
    # tuples from A after its barrier are held; B's before its barrier go through
    assert core.data(A, "a2") == []
    assert core.data(B, "b1") == [Process("b1")]
    assert core.data(A, "a3") == []
    # when B delivers it too, the barrier completes first, then the held tuples run in order
    assert core.barrier(B, 2, PREPARE, 1, "pB") == [
        Complete(PREPARE, 1, 2, ["pA", "pB"], True), Process("a2"), Process("a3")]
    assert core.data(A, "a4") == [Process("a4")]


def test_far_apart_barriers_count_nothing_twice():
    # Given a bolt whose input A delivers checkpoints long before B
    core = ready()
    processed = []

    def run(instructions):
        for ins in instructions:
            if isinstance(ins, Process):
                processed.append(ins.item)
            elif isinstance(ins, Complete):
                processed.append(("checkpoint", ins.txid))

    run(core.barrier(A, 2, PREPARE, 1, "pA"))
    for i in range(1000):
        run(core.data(A, f"a{i}"))  # all after A's barrier
        if i % 10 == 0:
            run(core.data(B, f"b{i}"))  # all before B's barrier
    run(core.barrier(B, 2, PREPARE, 1, "pB"))
    cut = processed.index(("checkpoint", 1))
    # Then the state saved at the checkpoint holds every b and no a
    assert all(x.startswith("b") for x in processed[:cut])
    assert all(x.startswith("a") for x in processed[cut + 1:])
    assert len(processed) == 1 + 1000 + 100


def test_a_reset_drops_what_inputs_sent_before_it_and_fails_held_tuples():
    core = ready()
    core.barrier(A, 2, PREPARE, 1, "pA")
    assert core.data(A, "held") == []
    # When a rollback arrives from A (the prepare failed somewhere)
    out = core.barrier(A, 3, ROLLBACK, 0, "rA")
    # Then the abandoned prepare's copy and the held tuple fail, and the state resets now
    assert out == [Fail("pA"), Reset(), Fail("held")]
    # B's tuples before its rollback were emitted before it: dropped
    assert core.data(B, "stale") == [Fail("stale")]
    # A's after its rollback wait for B's rollback
    assert core.data(A, "fresh") == []
    assert core.barrier(B, 3, ROLLBACK, 0, "rB") == [
        Complete(ROLLBACK, 0, 3, ["rA", "rB"], True), Process("fresh")]


def test_a_stateful_task_holds_data_until_its_first_reset():
    core = BarrierAligner([A, B], hold_until_initialized=True)
    assert core.data(SPOUT, "early") == []  # an unaligned input (a plain spout): held, kept
    assert core.data(A, "stale") == []
    out = core.barrier(A, 1, INIT, 0, "iA")
    assert out == [Reset(), Fail("stale")]
    assert core.barrier(B, 1, INIT, 0, "iB") == [Complete(INIT, 0, 1, ["iA", "iB"], True), Process("early")]


def test_a_prepare_before_any_reset_completes_uninitialized():
    # A restarted worker's task: it must not let this checkpoint commit
    core = BarrierAligner([A], hold_until_initialized=False)
    assert core.data(A, "x") == [Process("x")]  # stateless: processes at once
    assert core.barrier(A, 5, PREPARE, 7, "p") == [Complete(PREPARE, 7, 5, ["p"], False)]
    assert core.barrier(A, 6, COMMIT, 7, "c") == [Complete(COMMIT, 7, 6, ["c"], False)]


def test_a_retried_barrier_replaces_the_abandoned_one_and_releases_its_tuples():
    core = ready()
    core.barrier(A, 2, COMMIT, 1, "c1A")
    assert core.data(A, "x") == []
    assert core.barrier(A, 3, COMMIT, 1, "c2A") == [Fail("c1A"), Process("x")]
    assert core.barrier(B, 3, COMMIT, 1, "c2B") == [Complete(COMMIT, 1, 3, ["c2A", "c2B"], True)]


def test_unaligned_inputs_are_processed_during_a_prepare():
    core = ready()
    core.barrier(A, 2, PREPARE, 1, "pA")
    assert core.data(SPOUT, "s") == [Process("s")]


def test_a_task_without_barrier_inputs_is_refused():
    with pytest.raises(ValueError, match="at least one input"):
        BarrierAligner([], hold_until_initialized=True)


def test_passthrough_says_when_data_may_skip_the_core():
    core = BarrierAligner([A, B], hold_until_initialized=True)
    assert not core.passthrough  # holding until the first reset
    core.barrier(A, 1, INIT, 0, "iA")
    assert not core.passthrough
    core.barrier(B, 1, INIT, 0, "iB")
    assert core.passthrough
    core.barrier(A, 2, PREPARE, 1, "pA")
    assert not core.passthrough  # aligning
    core.barrier(B, 2, PREPARE, 1, "pB")
    assert core.passthrough
    assert BarrierAligner([A], hold_until_initialized=False).passthrough
