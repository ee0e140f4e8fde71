"""How many calls a DRPC server holds waiting, as a pure core: no clock, no event loop.

A call holds a connection (and a place in ``drpc.max.requests``) until its topology
answers or ``drpc.request.timeout.secs`` passes, ten minutes by default.  Two bounds keep
a user's calls from holding the server for everyone else:

* ``per_user`` (``drpc.max.pending.per.user``): the calls one user has waiting at once;
* ``unserved`` (``drpc.max.pending.unserved``): the calls waiting, all users together,
  for functions no topology serves, which only a timeout would end.  A function is
  served while a fetch of it waits at this server or one came within ``served_secs``
  (a spout's long poll asks again every few seconds while its topology runs).

A call past either bound is refused at once (429), never queued.  The shell (the app, on
its event loop) asks :meth:`CallLimits.admit` before it holds a call and gives the ticket
back with :meth:`CallLimits.release` however the call ends.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from squall.drpc_server.ownership import Refuse
from squall.errors import TooBusy

SERVED_SECS = 60.0  # a function fetched this recently counts as served


@dataclass(frozen=True)
class Ticket:
    user: str
    unserved: bool  # counted against the unserved bound (as it was when admitted)


class CallLimits:
    def __init__(self, per_user: int, unserved: int, served_secs: float = SERVED_SECS) -> None:
        self.per_user = per_user
        self.unserved = unserved
        self.served_secs = served_secs
        self.held: dict[str, int] = {}
        self.unserved_held = 0
        # function -> when a fetch of it last came, oldest first (so the stale leave from the front)
        self.last_fetch: OrderedDict[str, float] = OrderedDict()

    def fetching(self, function: str, now: float) -> None:
        """A topology asks for a request of ``function`` (and again when its wait ends)."""
        self.last_fetch[function] = now
        self.last_fetch.move_to_end(function)
        while self.last_fetch:
            oldest, when = next(iter(self.last_fetch.items()))
            if now - when <= self.served_secs:
                break
            del self.last_fetch[oldest]

    def served(self, function: str, now: float, waiting: bool = False) -> bool:
        """Whether a topology serves ``function`` (``waiting``: a fetch of it waits now)."""
        if waiting:
            return True
        when = self.last_fetch.get(function)
        return when is not None and now - when <= self.served_secs

    def admit(self, user: str, function: str, now: float, waiting: bool = False) -> Ticket | Refuse:
        held = self.held.get(user, 0)
        if held >= self.per_user:
            return Refuse(TooBusy, f"user {user!r} has {held} DRPC calls waiting already, the most "
                                   f"drpc.max.pending.per.user allows: call again when one is answered")
        unserved = not self.served(function, now, waiting)
        if unserved and self.unserved_held >= self.unserved:
            return Refuse(TooBusy, f"no topology serves DRPC function {function!r} now, and "
                                   f"{self.unserved_held} calls wait for such functions already, the most "
                                   "drpc.max.pending.unserved allows: call again once a topology serves it")
        self.held[user] = held + 1
        if unserved:
            self.unserved_held += 1
        return Ticket(user, unserved)

    def release(self, ticket: Ticket) -> None:
        left = self.held.get(ticket.user, 0) - 1
        if left > 0:
            self.held[ticket.user] = left
        else:
            self.held.pop(ticket.user, None)
        if ticket.unserved:
            self.unserved_held -= 1
