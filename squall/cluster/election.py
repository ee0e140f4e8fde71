"""Leader election among daemons (the nimbuses), on kazoo's Election recipe.

Every contender holds a sequential node under the election path; the lowest
leads.  A term lasts until the elector is stopped or its ZooKeeper session is
lost (see :class:`squall.cluster.session.Session`): the lock node dies with
the session, so another contender may lead already, and the term ends even
when a new session came back before the leader looked.  After a loss the
elector does not contend again until the session has recovered (the daemon
re-registered), then it runs for a new term.

A term is named by its lock node's sequence number, which only grows from
term to term: a leader's node is the lowest alive, so every node behind it
was made later and is numbered higher.  :class:`LeaderFence` carries both, and
a write made with it (:meth:`squall.cluster.state.ClusterState.put_assignment`)
checks in the same ZooKeeper transaction that the node is still there.  A
leader that was partitioned away, or paused, keeps believing it leads until
it next looks at its session; its lock node died with the session, so its
writes are refused the moment it was deposed, not when it notices.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from squall.clock import Clock
from squall.cluster.session import Session
from squall.errors import CoordinationError

log = structlog.get_logger("squall.cluster.election")

POLL_SECS = 0.2  # how often a leader looks at its session, and a lost elector at its recovery
RETRY_SECS = 1.0  # after an election that failed (connection trouble)


def _ignore(leading: bool) -> None:
    return None


@dataclass(frozen=True)
class LeaderFence:
    """One leadership term: ``leader`` (the contender's identifier) holds the
    lock node ``node``, whose sequence number ``term`` orders terms."""

    leader: str
    node: str
    term: int


class NotLeader(CoordinationError):
    """A write fenced by a leadership term that has ended (or none): not made."""

    def __init__(self, fence: LeaderFence | None) -> None:
        self.fence = fence
        if fence is None:
            msg = "not the leader: the write was not made"
        else:
            msg = (f"term {fence.term} of {fence.leader} has ended (its lock node is gone): "
                   "the write was not made")
        super().__init__(msg)


def term_of(node: str) -> int:
    """The sequence number kazoo's lock recipe appends to a contender's node name."""
    digits = node[-10:]
    if not digits.isdigit():
        msg = f"not a sequential lock node name: {node!r}"
        raise ValueError(msg)
    return int(digits)


class LeaderElection:
    """Runs for leadership on a thread of its own, from :meth:`start` to :meth:`stop`.

    ``on_change(True)`` is called on that thread when a term begins and
    ``on_change(False)`` when it ends; the term holds while ``on_change(True)``
    runs (nimbus's first reconciliation runs there, as the leader).
    """

    def __init__(self, client: Any, path: str, identifier: str, session: Session,
                 on_change: Callable[[bool], None] = _ignore, clock: Clock | None = None,
                 name: str = "election") -> None:
        self.client = client
        self.path = path
        self.identifier = identifier
        self.session = session
        self.on_change = on_change
        self.clock = clock or Clock()
        self.name = name
        self.is_leader = False
        self.terms = 0  # how many terms this elector won
        self.fence: LeaderFence | None = None  # the term held now, None between terms
        self._stop = threading.Event()
        self._recipe: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Leave the election; a leader's term ends within a poll.  :meth:`join` waits for it."""
        self._stop.set()
        if self._recipe is not None:
            self._recipe.cancel()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def leader(self) -> str | None:
        """The identifier of the contender that leads now, None if unknown."""
        try:
            contenders = self.client.Election(self.path).contenders()
        except Exception:  # noqa: BLE001 - ZooKeeper unreachable: nobody is known to lead
            return None
        return contenders[0] if contenders else None

    def _wait(self, seconds: float) -> None:
        self.clock.sleep_until(self.clock.now() + seconds, self._stop)

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.session.lost:
                self._wait(POLL_SECS)
                continue
            try:
                self._recipe = self.client.Election(self.path, self.identifier)
                self._recipe.run(self._lead)
            except Exception:  # noqa: BLE001 - connection trouble: try again
                if not self._stop.is_set():
                    log.exception("election failed; retrying", path=self.path)
                    self._wait(RETRY_SECS)

    def _lead(self) -> None:
        losses = self.session.losses
        lock = self._recipe.lock
        self.fence = LeaderFence(self.identifier, f"{lock.path}/{lock.node}", term_of(lock.node))
        self.terms += 1
        self.is_leader = True
        log.info("leadership term began", path=self.path, leader=self.identifier, term=self.fence.term)
        self._notify(True)
        while not self._stop.is_set() and not self.session.lost and self.session.losses == losses:
            self._wait(POLL_SECS)
        log.info("leadership term ended", path=self.path, leader=self.identifier, term=self.fence.term)
        self.is_leader = False
        self.fence = None
        self._notify(False)

    def _notify(self, leading: bool) -> None:
        try:
            self.on_change(leading)
        except Exception:  # noqa: BLE001 - the term's bookkeeping must not end with the callback
            log.exception("leadership callback failed", leading=leading)
