"""Who serves which DRPC function, the I/O around the pure core (squall.drpc_server.ownership):
the claims in ZooKeeper (squall.cluster.state, ``drpcowners/``), each topology's owner read
once from its record, and a sweep thread that reads the claims afresh and releases those
no live topology holds any more.

The app awaits :meth:`FunctionOwners.verdict` on its event loop: from memory, no I/O,
for every fetch and answer after a topology's first.  When that takes ZooKeeper (a
topology not seen yet, a claim to write) :meth:`FunctionOwners.check` runs on one of the
server's own I/O threads, started with it (the loop never blocks on ZooKeeper).
Two servers claiming one function at once: ZooKeeper's create lets one win, the other
reads the winner's claim and decides again; an update is made at the version read, so a
claim released or changed meanwhile is read again rather than overwritten.
"""

from __future__ import annotations

import asyncio
import dataclasses
import queue
import threading
from typing import Any

import structlog

from squall.clock import Clock
from squall.cluster.state import ClusterState
from squall.drpc_server.invokers import Invokers
from squall.drpc_server.ownership import NEW, Allow, Claim, Ownership, Refuse, Verdict, Write
from squall.errors import Unavailable

log = structlog.get_logger("squall.drpc_server.FunctionOwners")

ATTEMPTS = 3  # claim writes that lost a race, before the fetch is told to come back
SWEEP_SECS = 10.0  # the longest between two reads of every claim
IO_THREADS = 2  # ZooKeeper's part of first looks, off the event loop


class FunctionOwners:
    def __init__(self, state: ClusterState, conf: dict[str, Any], invokers: Invokers,
                 clock: Clock | None = None) -> None:
        self.state = state
        self.invokers = invokers
        self.clock = clock or Clock()
        self.core = Ownership(conf.get("drpc.authorizer.acl"), float(conf["drpc.function.release.secs"]),
                              int(conf["drpc.max.functions.per.user"]))
        # A claim is released within a quarter of its grace after it is due.
        self.period = min(SWEEP_SECS, max(0.2, self.core.release_secs / 4))
        self._lock = threading.Lock()  # the core and the owners, shared by the loop and threads
        self._owners: dict[str, str | None] = {}  # topology id -> its owner, as its record says
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()

    # -- deciding ----------------------------------------------------------------------------------

    async def verdict(self, topology_id: str, function: str, claiming: bool) -> Allow | Refuse:
        """On the event loop: :meth:`quick`, else :meth:`check` on an I/O thread."""
        found = self.quick(topology_id, function, claiming)
        if found is not None:
            return found
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Allow | Refuse] = loop.create_future()
        self._jobs.put((topology_id, function, claiming, loop, future))
        return await future

    def quick(self, topology_id: str, function: str, claiming: bool) -> Allow | Refuse | None:
        """The verdict from memory; None when it takes ZooKeeper (then :meth:`check`)."""
        with self._lock:
            if topology_id not in self._owners:
                return None
            verdict = self.core.decide(function, topology_id, self._owners[topology_id],
                                       self.invokers.live(), claiming)
        return None if isinstance(verdict, Write) else verdict

    def check(self, topology_id: str, function: str, claiming: bool) -> Allow | Refuse:
        """The verdict, reading the topology's owner and writing a claim as needed (blocking)."""
        try:
            return self._check(topology_id, function, claiming)
        except Exception as e:  # noqa: BLE001 - ZooKeeper unreachable: the topology asks again
            log.warning("could not check who serves a drpc function", function=function,
                        topology=topology_id, error=repr(e))
            return Refuse(Unavailable, "the DRPC server could not reach ZooKeeper to check who serves "
                                       f"function {function!r}: ask again")

    def _check(self, topology_id: str, function: str, claiming: bool) -> Allow | Refuse:
        owner = self._owner(topology_id)
        for _ in range(ATTEMPTS):
            with self._lock:
                verdict: Verdict = self.core.decide(function, topology_id, owner, self.invokers.live(),
                                                    claiming)
            if not isinstance(verdict, Write):
                return verdict
            claim = verdict.claim
            if claim.version == NEW:
                version = self.state.claim_drpc_function(function, claim.record())
            else:
                version = self.state.update_drpc_owner(function, claim.record(), claim.version)
            if version is not None:
                with self._lock:
                    self.core.learn(dataclasses.replace(claim, version=version))
                log.info("drpc function claimed" if claim.version == NEW else "drpc function joined",
                         function=function, owner=owner, topology=topology_id)
                return Allow()
            self._reread(function)  # another server wrote first: decide on what it wrote
        return Refuse(Unavailable, f"the owner of DRPC function {function!r} kept changing while this "
                                   "topology fetched it: ask again")

    def _owner(self, topology_id: str) -> str | None:
        with self._lock:
            if topology_id in self._owners:
                return self._owners[topology_id]
        record = self.state.topology(topology_id)
        if record is None:  # being removed: not remembered, in case it is only late
            return None
        owner = record.get("owner")
        owner = owner if isinstance(owner, str) and owner else None
        with self._lock:
            self._owners[topology_id] = owner
        return owner

    def _reread(self, function: str) -> None:
        found = self.state.drpc_owner(function)
        claim = Claim.from_record(found[0], found[1]) if found is not None else None
        with self._lock:
            if claim is not None and claim.function == function:
                self.core.learn(claim)
            else:
                self.core.forget(function)

    # -- the sweep ---------------------------------------------------------------------------------

    def start(self) -> None:
        if self._threads:
            return
        self._threads = [threading.Thread(target=self._sweeping, name="drpc-owners-sweep", daemon=True),
                         *(threading.Thread(target=self._working, name=f"drpc-owners-io-{i}", daemon=True)
                           for i in range(IO_THREADS))]
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """After the HTTP server: no verdict is awaited any more."""
        self._stop.set()
        for _ in range(IO_THREADS):
            self._jobs.put(None)
        for thread in self._threads:
            thread.join(timeout)

    def _working(self) -> None:
        while (job := self._jobs.get()) is not None:
            topology_id, function, claiming, loop, future = job
            found = self.check(topology_id, function, claiming)
            try:
                loop.call_soon_threadsafe(_settle, future, found)
            except RuntimeError:  # the loop closed meanwhile: nobody waits
                pass

    def _sweeping(self) -> None:
        while True:
            try:
                self.sweep()
            except Exception as e:  # noqa: BLE001 - ZooKeeper trouble: the next round reads again
                log.warning("drpc owners sweep failed; next round", error=repr(e))
            if self._stop.wait(self.period):
                return

    def sweep(self) -> list[str]:
        """Read every claim afresh and release the due ones; the functions released."""
        if not self.invokers.seen.is_set():
            return []  # which topologies live is not known yet: every claim would look vacant
        claims = []
        for record, version in self.state.drpc_owners():
            claim = Claim.from_record(record, version)
            if claim is not None:
                claims.append(claim)
        live = self.invokers.live()
        with self._lock:
            self.core.replace(claims)
            due = self.core.sweep(self.clock.now(), live)
            self._owners = {t: owner for t, owner in self._owners.items() if t in live}
        released = []
        for claim in due:
            if self.state.release_drpc_function(claim.function, claim.version):
                released.append(claim.function)
                log.info("drpc function released", function=claim.function, owner=claim.owner,
                         after_secs=self.core.release_secs)
            with self._lock:
                self.core.forget(claim.function)
        return released


def _settle(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():  # its request may have been cancelled meanwhile
        future.set_result(value)
