"""Who serves a DRPC function (squall.drpc_server.ownership), as a pure core: the verdicts
for fetches and answers, Storm's invocation.user, and when a claim is let go."""

from __future__ import annotations

from squall.drpc_server.ownership import NEW, Allow, Claim, Ownership, Refuse, Write
from squall.errors import Forbidden, TooBusy

T0 = 1000.0
LIVE = frozenset({"t-alice", "t-alice-2", "t-bob"})


def core(acl: dict | None = None, release_secs: float = 60, max_functions: int = 3) -> Ownership:
    return Ownership(acl, release_secs, max_functions)


def written(ownership: Ownership, verdict: object, version: int = 0) -> Claim:
    """What the shell does with a Write: ZooKeeper takes it, the core learns it."""
    assert isinstance(verdict, Write), verdict
    claim = Claim(verdict.claim.function, verdict.claim.owner, verdict.claim.topologies, version)
    ownership.learn(claim)
    return claim


def test_the_first_topology_to_fetch_claims_the_function_for_its_owner() -> None:
    o = core()
    verdict = o.decide("f", "t-alice", "alice", LIVE)
    assert verdict == Write(Claim("f", "alice", frozenset({"t-alice"}), NEW))
    written(o, verdict)
    assert o.decide("f", "t-alice", "alice", LIVE) == Allow()
    assert o.decide("f", "t-alice", "alice", LIVE, claiming=False) == Allow()  # its answers


def test_another_users_topology_is_refused_fetching_and_answering() -> None:
    o = core()
    written(o, o.decide("f", "t-alice", "alice", LIVE))
    for claiming in (True, False):
        verdict = o.decide("f", "t-bob", "bob", LIVE, claiming)
        assert isinstance(verdict, Refuse) and verdict.kind is Forbidden
        assert "belongs to user 'alice'" in verdict.reason and "invocation.user" in verdict.reason
    assert o.claims["f"].owner == "alice"


def test_another_topology_of_the_owner_joins_and_dead_ones_leave_the_claim() -> None:
    o = core()
    written(o, o.decide("f", "t-old", "alice", LIVE | {"t-old"}), version=0)
    # t-old was killed; alice's new version fetches: it joins, written over version 0
    verdict = o.decide("f", "t-alice-2", "alice", LIVE)
    assert verdict == Write(Claim("f", "alice", frozenset({"t-alice-2"}), 0))


def test_answering_claims_nothing() -> None:
    o = core()
    verdict = o.decide("f", "t-bob", "bob", LIVE, claiming=False)
    assert isinstance(verdict, Refuse) and verdict.kind is Forbidden and "f" not in o.claims


def test_the_acls_invocation_user_serves_the_function_and_nobody_else() -> None:
    o = core(acl={"f": {"invocation.user": "bob", "client.users": ["alice"]}, "g": {"client.users": ["x"]}})
    written(o, Write(Claim("f", "alice", frozenset({"t-alice"}))))  # claimed before the ACL said so
    assert o.decide("f", "t-bob", "bob", LIVE) == Allow()
    verdict = o.decide("f", "t-alice", "alice", LIVE)
    assert isinstance(verdict, Refuse) and verdict.kind is Forbidden and "invocation.user" in verdict.reason
    # client.users alone hands nothing over: the first to fetch claims it
    assert isinstance(o.decide("g", "t-alice", "alice", LIVE), Write)


def test_an_invocation_user_that_is_not_a_user_name_lets_no_topology_serve_the_function() -> None:
    o = core(acl={"f": {"invocation.user": ["bob"]}, "g": {"invocation.user": ""}})
    for function in ("f", "g"):
        verdict = o.decide(function, "t-bob", "bob", LIVE)
        assert isinstance(verdict, Refuse) and verdict.kind is Forbidden and "one user name" in verdict.reason


def test_a_topology_without_an_owner_serves_nothing() -> None:
    verdict = core().decide("f", "t-x", None, LIVE)
    assert isinstance(verdict, Refuse) and verdict.kind is Forbidden and "no owner" in verdict.reason


def test_a_user_claims_at_most_max_functions() -> None:
    o = core(max_functions=2)
    written(o, o.decide("a", "t-alice", "alice", LIVE))
    written(o, o.decide("b", "t-alice", "alice", LIVE))
    verdict = o.decide("c", "t-alice", "alice", LIVE)
    assert isinstance(verdict, Refuse) and verdict.kind is TooBusy
    assert "drpc.max.functions.per.user" in verdict.reason
    assert isinstance(o.decide("c", "t-bob", "bob", LIVE), Write)  # another user's own count


def test_a_claim_is_released_only_after_its_last_topology_is_gone_for_release_secs() -> None:
    o = core(release_secs=60)
    claim = written(o, o.decide("f", "t-alice", "alice", LIVE), version=4)
    assert o.sweep(T0, LIVE) == []
    gone = LIVE - {"t-alice"}
    assert o.sweep(T0 + 1, gone) == []  # vacant from now on
    assert o.sweep(T0 + 60, gone) == []
    # meanwhile, another user's topology is still refused: the grace keeps it alice's
    assert isinstance(o.decide("f", "t-bob", "bob", gone), Refuse)
    assert o.sweep(T0 + 61, gone) == [claim]
    o.forget("f")  # the shell released it
    assert isinstance(o.decide("f", "t-bob", "bob", gone), Write)


def test_a_redeploy_within_the_grace_keeps_the_function() -> None:
    o = core(release_secs=60)
    written(o, o.decide("f", "t-alice", "alice", LIVE))
    gone = LIVE - {"t-alice"}
    o.sweep(T0, gone)
    written(o, o.decide("f", "t-alice-2", "alice", gone), version=1)
    assert o.sweep(T0 + 120, gone) == []  # t-alice-2 lives: no longer vacant


def test_claims_read_afresh_replace_what_was_known() -> None:
    o = core()
    written(o, o.decide("f", "t-alice", "alice", LIVE))
    o.replace([Claim("g", "bob", frozenset({"t-bob"}), 2)])  # f released by another server
    assert set(o.claims) == {"g"}
    assert isinstance(o.decide("g", "t-alice", "alice", LIVE), Refuse)


def test_a_claim_round_trips_through_its_record_and_junk_is_no_claim() -> None:
    claim = Claim("f", "alice", frozenset({"t-1", "t-2"}), 3)
    assert Claim.from_record(claim.record(), 3) == claim
    for junk in (None, [], {"function": "f"}, {"function": 1, "owner": "a", "topologies": []}):
        assert Claim.from_record(junk, 0) is None
