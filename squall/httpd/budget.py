"""How many requests a server holds at once, in all and per user: a pure core.

A request holds its place from its headers until its answer's last byte is sent, so a
slow reader (a log download read a byte at a time, a body dribbled in) keeps it the whole
while.  With one bound for everyone, one user with a few slow connections holds the
server for all; the per-user bound leaves the others their share.  Both refuse at once
(503 busy in all, 429 for that user), never queue: a queue would only make the wait
someone else's.  The shell (squall.httpd.guard.Guard, on the server's event loop) asks
:meth:`RequestBudget.admit` and gives the place back with :meth:`RequestBudget.release`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Refused:
    status: int
    reason: str


class RequestBudget:
    def __init__(self, total: int, per_user: int | None = None, server: str = "nimbus") -> None:
        """``per_user``: None, no bound per user; ``server``: named in the refusals."""
        self.total = total
        self.per_user = per_user
        self.server = server
        self.serving = 0
        self.by_user: dict[str, int] = {}

    def admit(self, user: str | None) -> Refused | None:
        """None: ``user`` holds a place now (give it back with :meth:`release`).  A request
        with no user (an insecure server) counts in all only: it has no one to share with."""
        if self.serving >= self.total:
            return Refused(503, f"{self.server} is busy: too many open requests")
        held = self.by_user.get(user, 0) if user is not None else 0
        if user is not None and self.per_user is not None and held >= self.per_user:
            return Refused(429, f"user {user!r} has {held} requests open at {self.server} already, the "
                                "most one user may: try again when one is done")
        self.serving += 1
        if user is not None:
            self.by_user[user] = held + 1
        return None

    def release(self, user: str | None) -> None:
        self.serving -= 1
        if user is None:
            return
        left = self.by_user.get(user, 0) - 1
        if left > 0:
            self.by_user[user] = left
        else:
            self.by_user.pop(user, None)
