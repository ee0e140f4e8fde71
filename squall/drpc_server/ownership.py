"""Who may serve a DRPC function, as a pure core: the decisions, no ZooKeeper, no clock.

In a secure cluster a function belongs to a user.  A topology's DRPC credential fetches
and answers a function's requests only when its topology's owner (who submitted it) is
the function's:

* the ``invocation.user`` that ``drpc.authorizer.acl`` names for the function (Storm's
  DRPCSimpleACLAuthorizer), when it names one: the admin's word, never written down;
* else the user whose topology first fetched it: its *claim*, ``{function, owner,
  topologies}``, kept in ZooKeeper by the shell (squall.drpc_server.owners) so that every
  DRPC server, and one restarted, decides alike.

A claim lists the owner's live topologies that have fetched the function.  It lasts while
one of them lives, and ``release_secs`` after the last is gone (killed): long enough to
redeploy without another user's topology taking the function meanwhile, short enough that
functions nobody serves any more do not pile up.  A user claims at most
``max_functions`` at once, so a topology fetching made-up names cannot fill ZooKeeper.
Why not keep claims for ever with their owner: a function would then stay with someone
who left, and the claims would grow with every name ever served.

The shell asks :meth:`Ownership.decide` and carries out what it gets: :class:`Allow`,
:class:`Refuse` (the HTTP status and the reason), or :class:`Write` (a new claim, or the
claim with this topology added, to write at the version the core last saw; on a
conflict the shell reads the claim again, hands it to :meth:`learn` and asks again).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from typing import Any

from squall.errors import Forbidden, Refused, TooBusy

INVOCATION_USER = "invocation.user"  # Storm's key in a function's drpc.authorizer.acl entry
NEW = -1  # the version of a claim not yet in ZooKeeper: the shell creates it


@dataclass(frozen=True)
class Claim:
    function: str
    owner: str
    topologies: frozenset[str]
    version: int = NEW  # the ZooKeeper node's, as last read or written

    def record(self) -> dict[str, Any]:
        return {"function": self.function, "owner": self.owner, "topologies": sorted(self.topologies)}

    @classmethod
    def from_record(cls, record: Any, version: int) -> Claim | None:
        """The claim a node holds; None for one that is not a claim (it is left alone)."""
        if not isinstance(record, Mapping):
            return None
        function, owner, topologies = record.get("function"), record.get("owner"), record.get("topologies")
        if not isinstance(function, str) or not isinstance(owner, str) or not isinstance(topologies, list):
            return None
        return cls(function, owner, frozenset(t for t in topologies if isinstance(t, str)), version)


@dataclass(frozen=True)
class Allow:
    pass


@dataclass(frozen=True)
class Refuse:
    kind: type[Refused]  # what the caller may do about it (the HTTP edge gives it a status)
    reason: str


@dataclass(frozen=True)
class Write:
    claim: Claim  # its version: the one to write over (NEW: create it)


Verdict = Allow | Refuse | Write


def invocation_user(acl: Mapping[str, Any] | None, function: str) -> str | None:
    """The user ``drpc.authorizer.acl`` hands ``function`` to, if it names one (``""`` for
    an entry that names something else there: no topology may serve it then, rather than
    the first to come)."""
    entry = (acl or {}).get(function)
    if not isinstance(entry, Mapping) or INVOCATION_USER not in entry:
        return None
    user = entry[INVOCATION_USER]
    return user if isinstance(user, str) else ""


@dataclass
class Ownership:
    acl: Mapping[str, Any] | None
    release_secs: float
    max_functions: int
    claims: dict[str, Claim] = field(default_factory=dict)
    vacant_since: dict[str, float] = field(default_factory=dict)  # function -> when its last topology went

    # -- deciding ----------------------------------------------------------------------------------

    def decide(self, function: str, topology_id: str, owner: str | None, live: Set[str],
               claiming: bool = True) -> Verdict:
        """May ``topology_id`` (of ``owner``; ``live``: the topologies that exist now) fetch
        (``claiming``) or answer a request of ``function``?"""
        if owner is None:
            return Refuse(Forbidden, f"topology {topology_id} has no owner on record, so it may serve no "
                                     "DRPC function (was it submitted to an insecure nimbus?)")
        handed_to = invocation_user(self.acl, function)
        if handed_to == "":
            return Refuse(Forbidden,
                          f"drpc.authorizer.acl names no user as DRPC function {function!r}'s "
                          "invocation.user (Storm's form: one user name), so no topology serves it")
        if handed_to is not None:
            if owner == handed_to:
                return Allow()
            return Refuse(Forbidden,
                          f"DRPC function {function!r} is served by user {handed_to!r}'s topologies "
                          f"(its invocation.user in drpc.authorizer.acl); topology {topology_id} is "
                          f"{owner!r}'s")
        claim = self.claims.get(function)
        if claim is None:
            if not claiming:
                return Refuse(Forbidden,
                              f"DRPC function {function!r} is not served by user {owner!r}'s topologies "
                              f"(none fetched it), so topology {topology_id} may not answer it")
            held = sum(1 for c in self.claims.values() if c.owner == owner)
            if held >= self.max_functions:
                return Refuse(TooBusy,
                              f"user {owner!r}'s topologies serve {held} DRPC functions already, the "
                              f"most drpc.max.functions.per.user allows; {function!r} is not taken")
            return Write(Claim(function, owner, frozenset({topology_id})))
        if claim.owner != owner:
            return Refuse(Forbidden,
                          f"DRPC function {function!r} belongs to user {claim.owner!r}, whose topology "
                          f"first served it; topology {topology_id} is {owner!r}'s (an admin may hand "
                          "the function over with its invocation.user in drpc.authorizer.acl)")
        if topology_id in claim.topologies:
            return Allow()
        # Another topology of the owner (a redeploy): it joins, and the gone ones leave the list.
        return Write(Claim(function, owner, (claim.topologies & live) | {topology_id}, claim.version))

    # -- what ZooKeeper holds ----------------------------------------------------------------------

    def learn(self, claim: Claim) -> None:
        """A claim as it is in ZooKeeper now (read, or just written)."""
        self.claims[claim.function] = claim

    def forget(self, function: str) -> None:
        """The function's claim is gone from ZooKeeper (released, here or by another server)."""
        self.claims.pop(function, None)
        self.vacant_since.pop(function, None)

    def replace(self, claims: Iterable[Claim]) -> None:
        """Every claim ZooKeeper holds, read afresh: what other servers claimed or released shows."""
        fresh = {c.function: c for c in claims}
        for function in set(self.claims) - set(fresh):
            self.vacant_since.pop(function, None)
        self.claims = fresh

    # -- letting go --------------------------------------------------------------------------------

    def sweep(self, now: float, live: Set[str]) -> list[Claim]:
        """The claims to release now: no topology of theirs has lived for ``release_secs``.
        A vacancy is timed from when this core first saw it (after a restart, from then):
        a claim is kept too long rather than too short."""
        due = []
        for function, claim in self.claims.items():
            if claim.topologies & live:
                self.vacant_since.pop(function, None)
                continue
            since = self.vacant_since.setdefault(function, now)
            if now - since >= self.release_secs:
                due.append(claim)
        return due
