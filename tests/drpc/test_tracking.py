"""When a task of a linear DRPC topology has every tuple of a request (squall.drpc.tracking):
the pure core of Storm's CoordinatedBolt, event by event."""

from __future__ import annotations

from squall.drpc.tracking import RequestTracker

NOW = 100.0


def test_the_first_bolt_is_done_once_its_one_tuple_of_the_request_is_acked() -> None:
    tracker = RequestTracker(0, first=True, needs_id=False)
    tr = tracker.track(7, NOW)
    step = tracker.acked(tr, "args-tuple")
    assert step.finish and step.anchor == "args-tuple" and step.done == []


def test_counts_and_tuples_in_any_order_finish_exactly_when_they_add_up() -> None:
    # Given a task with two upstream tasks reporting
    tracker = RequestTracker(2, first=False, needs_id=False)
    tr = tracker.track(7, NOW)
    # When one reports 2 tuples before they arrive, the other 1 after its tuple arrived
    assert not tracker.acked(tr, "t1").finish
    assert not tracker.count(tr, 2, "count-a", NOW).finish
    assert not tracker.acked(tr, "t2").finish
    step = tracker.count(tr, 1, "count-b", NOW)
    assert not step.finish  # three promised, two here
    step = tracker.acked(tr, "t3")
    # Then the last tuple finishes it, and the held count tuples are done with it
    assert step.finish and step.anchor == "t3" and step.done == ["count-a", "count-b"]
    assert tracker.acked(tr, "late").finish is False


def test_zero_counts_finish_a_task_that_got_no_tuple_of_the_request() -> None:
    tracker = RequestTracker(3, first=False, needs_id=False)
    tr = tracker.track(7, NOW)
    for i in range(2):
        assert not tracker.count(tr, 0, f"c{i}", NOW).finish
    step = tracker.count(tr, 0, "c2", NOW)
    assert step.finish and step.anchor == "c2" and step.done == ["c0", "c1", "c2"]


def test_a_last_bolt_with_finished_id_waits_for_the_id_and_acks_counts_as_they_come() -> None:
    tracker = RequestTracker(1, first=False, needs_id=True)
    tr = tracker.track(7, NOW)
    step = tracker.count(tr, 0, "count", NOW)
    assert not step.finish and step.release == ["count"]
    step = tracker.got_id(tr, "id-tuple", NOW)
    assert step.finish and step.done == ["id-tuple"]


def test_a_failed_tuple_fails_what_the_task_holds_and_whatever_comes_later() -> None:
    tracker = RequestTracker(2, first=False, needs_id=False)
    tr = tracker.track(7, NOW)
    tracker.count(tr, 1, "count-a", NOW)
    step = tracker.fail(tr)
    assert step.fail and step.done == ["count-a"]
    step = tracker.count(tr, 0, "count-b", NOW)
    assert step.fail and step.done == ["count-b"] and not step.finish


def test_requests_nobody_finishes_expire_after_the_message_timeout() -> None:
    tracker = RequestTracker(1, first=False, needs_id=True)
    old = tracker.track(1, NOW)
    tracker.count(old, 0, "c", NOW)
    fresh = tracker.track(2, NOW + 20)
    assert tracker.expire(NOW + 10) == [old]
    assert tracker.get(1) is None and tracker.get(2) is fresh
