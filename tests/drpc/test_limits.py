"""How many calls a DRPC server holds (squall.drpc_server.limits), as a pure core: per user,
and for functions nobody serves."""

from __future__ import annotations

from squall.drpc_server.limits import CallLimits, Ticket
from squall.drpc_server.ownership import Refuse
from squall.errors import TooBusy

T0 = 1000.0


def test_a_user_holds_at_most_per_user_calls_and_another_user_is_not_counted() -> None:
    limits = CallLimits(per_user=2, unserved=100)
    tickets = [limits.admit("alice", "f", T0, waiting=True) for _ in range(2)]
    assert all(isinstance(t, Ticket) for t in tickets)
    refused = limits.admit("alice", "f", T0, waiting=True)
    assert isinstance(refused, Refuse) and refused.kind is TooBusy
    assert "drpc.max.pending.per.user" in refused.reason and "'alice'" in refused.reason
    assert isinstance(limits.admit("bob", "f", T0, waiting=True), Ticket)
    limits.release(tickets[0])  # one answered: room for the next
    assert isinstance(limits.admit("alice", "f", T0, waiting=True), Ticket)


def test_calls_to_functions_nobody_serves_are_bounded_for_all_users_together() -> None:
    limits = CallLimits(per_user=10, unserved=2)
    first = limits.admit("alice", "nobody", T0)
    assert isinstance(first, Ticket) and first.unserved
    assert isinstance(limits.admit("bob", "nobody-either", T0), Ticket)
    refused = limits.admit("carol", "nobody", T0)
    assert isinstance(refused, Refuse) and refused.kind is TooBusy
    assert "drpc.max.pending.unserved" in refused.reason
    # a served function is still called, by anyone
    limits.fetching("f", T0)
    served = limits.admit("carol", "f", T0 + 1)
    assert isinstance(served, Ticket) and not served.unserved
    limits.release(first)
    assert limits.unserved_held == 1 and isinstance(limits.admit("carol", "nobody", T0), Ticket)


def test_a_function_counts_as_served_while_fetched_within_the_window() -> None:
    limits = CallLimits(per_user=10, unserved=10, served_secs=60)
    assert not limits.served("f", T0)
    assert limits.served("f", T0, waiting=True)
    limits.fetching("f", T0)
    assert limits.served("f", T0 + 60) and not limits.served("f", T0 + 61)


def test_the_fetch_times_kept_are_only_the_recent_ones() -> None:
    limits = CallLimits(per_user=10, unserved=10, served_secs=60)
    for i in range(100):
        limits.fetching(f"f{i}", T0)
    limits.fetching("f0", T0 + 30)
    limits.fetching("g", T0 + 61)
    assert list(limits.last_fetch) == ["f0", "g"]


def test_released_tickets_leave_no_trace() -> None:
    limits = CallLimits(per_user=3, unserved=3)
    tickets = [limits.admit(user, "nobody", T0) for user in ("alice", "alice", "bob")]
    for ticket in tickets:
        assert isinstance(ticket, Ticket)
        limits.release(ticket)
    assert limits.held == {} and limits.unserved_held == 0
