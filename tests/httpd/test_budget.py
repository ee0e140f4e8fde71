"""The request budget (squall.httpd.budget): at most so many requests at once in all and per
user, refused at once past either, each place given back when its request ends."""

from __future__ import annotations

from squall.httpd.budget import RequestBudget


def test_one_user_holds_at_most_their_share_and_the_others_are_served() -> None:
    budget = RequestBudget(total=5, per_user=2, server="logviewer")
    assert budget.admit("bob") is None and budget.admit("bob") is None
    refused = budget.admit("bob")
    assert refused is not None and refused.status == 429 and "'bob'" in refused.reason
    assert "logviewer" in refused.reason
    assert budget.admit("carol") is None  # bob's slow downloads leave carol hers
    budget.release("bob")
    assert budget.admit("bob") is None  # a place given back is bob's again
    assert budget.by_user == {"bob": 2, "carol": 1} and budget.serving == 3


def test_past_the_total_everyone_is_told_the_server_is_busy() -> None:
    budget = RequestBudget(total=3, per_user=2)
    for user in ("a", "b", "c"):
        assert budget.admit(user) is None
    refused = budget.admit("d")
    assert refused is not None and refused.status == 503
    assert refused.reason == "nimbus is busy: too many open requests"
    for user in ("a", "b", "c"):
        budget.release(user)
    assert budget.serving == 0 and budget.by_user == {}


def test_without_a_user_or_a_per_user_bound_only_the_total_counts() -> None:
    insecure = RequestBudget(total=3, per_user=1)
    assert [insecure.admit(None) for _ in range(3)] == [None, None, None]  # no one to share with
    assert insecure.admit(None) is not None and insecure.by_user == {}
    unbounded = RequestBudget(total=3)
    assert [unbounded.admit("bob") for _ in range(3)] == [None, None, None]
    refused = unbounded.admit("bob")
    assert refused is not None and refused.status == 503
