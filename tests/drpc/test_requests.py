"""A DRPC server's request queues as a pure core (squall.drpc.requests): Storm's DRPC.java
behaviour, driven with a clock passed in."""

from __future__ import annotations

import pytest

from squall.drpc.requests import FAILED_REQUEST, SERVER_SHUTDOWN, SERVER_TIMEOUT, RequestQueues

T0 = 1000.0


def queues(timeout: float = 10.0) -> RequestQueues:
    return RequestQueues(timeout)


def test_a_fetch_takes_the_oldest_request_of_its_function_only() -> None:
    q = queues()
    first, _ = q.submit("exclaim", "a", T0)
    q.submit("reach", "x", T0)
    second, _ = q.submit("exclaim", "b", T0 + 1)
    assert q.fetch("exclaim") is first and first.fetched
    assert q.fetch("exclaim") is second
    assert q.fetch("exclaim") is None
    assert q.fetch("reach").args == "x"
    assert q.fetch("nothing") is None


def test_a_result_settles_its_request_once_and_a_late_or_unknown_one_is_ignored() -> None:
    q = queues()
    request, _ = q.submit("f", "args", T0)
    assert q.fetch("f") is request
    assert q.result(request.id, "answer") is request
    assert request.settled and request.result == "answer" and request.error is None
    assert q.result(request.id, "again") is None and request.result == "answer"
    assert q.fail(request.id, "too late") is None and request.error is None
    assert q.result("no-such-id", "x") is None
    assert len(q) == 0


def test_a_failed_request_says_so_with_the_topologys_reason() -> None:
    q = queues()
    request, _ = q.submit("f", "args", T0)
    q.fetch("f")
    assert q.fail(request.id, "its tuple tree failed") is request
    assert request.error is not None and request.error.type == FAILED_REQUEST
    assert "its tuple tree failed" in str(request.error) and "'f'" in str(request.error)


def test_a_request_past_the_timeout_times_out_whether_queued_or_fetched_and_leaves_the_queue() -> None:
    q = queues(timeout=5)
    queued, _ = q.submit("f", "never fetched", T0)
    fetched, _ = q.submit("g", "fetched, never answered", T0 + 1)
    q.fetch("g")
    later, _ = q.submit("f", "later", T0 + 3)
    assert q.next_deadline() == T0 + 5
    assert q.expire(T0 + 4.9) == []
    assert q.expire(T0 + 6) == [queued, fetched]
    for request, where in ((queued, "no topology fetched it"), (fetched, "did not answer")):
        assert request.error is not None and request.error.type == SERVER_TIMEOUT
        assert where in str(request.error) and "drpc.request.timeout.secs" in str(request.error)
    # Storm's testDequeueAfterTimeout: the timed-out request is no longer there to fetch.
    assert q.fetch("f") is later
    assert q.fetch("f") is None
    assert q.result(queued.id, "too late") is None


def test_a_waiting_fetcher_gets_the_next_request_at_once_the_longest_waiting_first() -> None:
    q = queues()
    assert q.wait_for_request("f", "fetcher-1") is None
    assert q.wait_for_request("f", "fetcher-2") is None
    assert q.wait_for_request("g", "fetcher-g") is None
    request, fetcher = q.submit("f", "a", T0)
    assert fetcher == "fetcher-1" and request.fetched
    _, fetcher = q.submit("f", "b", T0)
    assert fetcher == "fetcher-2"
    # Nobody waits for f any more: the next one is queued.
    third, fetcher = q.submit("f", "c", T0)
    assert fetcher is None and q.fetch("f") is third
    # A fetcher that stopped waiting gets nothing.
    q.stop_waiting("g", "fetcher-g")
    _, fetcher = q.submit("g", "x", T0)
    assert fetcher is None


def test_a_request_handed_to_a_fetcher_that_had_gone_goes_back_to_the_head_of_its_queue() -> None:
    q = queues()
    q.wait_for_request("f", "gone")
    lost, _ = q.submit("f", "first", T0)
    q.submit("f", "second", T0 + 1)
    assert q.requeue(lost) is None and not lost.fetched
    assert q.fetch("f") is lost
    assert q.fetch("f").args == "second"
    # ...or to another fetcher already waiting.
    assert q.wait_for_request("f", "waiting") is None
    assert q.requeue(lost) == "waiting"
    # A request settled meanwhile stays settled.
    q.result(lost.id, "done")
    assert q.requeue(lost) is None


def test_many_clients_of_many_functions_are_served_in_order_each() -> None:
    q = queues()
    submitted = {f: [q.submit(f, f"{f}-{i}", T0 + i)[0] for i in range(50)] for f in ("a", "b", "c")}
    for function, requests in submitted.items():
        assert [q.fetch(function) for _ in requests] == requests
    for requests in submitted.values():
        for request in requests:
            q.result(request.id, request.args.upper())
    assert all(r.result == r.args.upper() for rs in submitted.values() for r in rs)
    assert len({r.id for rs in submitted.values() for r in rs}) == 150  # random ids, no two alike
    assert len(q) == 0 and q.queues == {} and q.fetchers == {}


def test_a_client_that_went_away_takes_its_request_with_it() -> None:
    q = queues()
    gone, _ = q.submit("f", "a", T0)
    kept, _ = q.submit("f", "b", T0)
    assert q.cancel(gone.id) is gone
    assert q.fetch("f") is kept and q.fetch("f") is None
    assert q.result(gone.id, "x") is None


def test_closing_settles_every_request_with_server_shutdown_and_wakes_every_fetcher() -> None:
    q = queues()
    waiting, _ = q.submit("f", "a", T0)
    q.wait_for_request("g", "fetcher")
    settled, fetchers = q.close()
    assert settled == [waiting] and fetchers == ["fetcher"]
    assert waiting.error is not None and waiting.error.type == SERVER_SHUTDOWN
    late, _ = q.submit("f", "after", T0)
    assert late.error is not None and late.error.type == SERVER_SHUTDOWN
    assert q.wait_for_request("g", "another") is None and q.fetchers == {}


@pytest.mark.parametrize("timeout", [0.001, 600])
def test_expiry_looks_at_the_oldest_only(timeout: float) -> None:
    q = queues(timeout)
    for i in range(1000):
        q.submit("f", str(i), T0 + i)
    assert len(q.expire(T0 + 499 + timeout)) == 500
    assert q.next_deadline() == T0 + 500 + timeout
