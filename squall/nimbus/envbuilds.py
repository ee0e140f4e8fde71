"""Nimbus's caps on topologies' environment builds.

A build may take minutes (supervisor.env.build.timeout.secs), and it holds the
submit's request, one of nimbus.http.max.connections, all that time.  So nimbus
runs at most ``nimbus.env.builds.per.user`` builds at once for one user and
``nimbus.env.builds.max`` in all, and refuses the next submit that needs one at
once (429) instead of letting it wait: slow builds never hold every request
slot.  A cached environment needs no build and no slot.  The environments of
one user's topologies may take ``nimbus.env.max.bytes.per.user`` on nimbus's
disk (each supervisor builds the same ones).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from squall.errors import Forbidden, SquallError, TooBusy
from squall.runtime.envs import from_record

NO_USER = "(no user)"  # the submits of an insecure cluster, which names no one


class BuildSlots:
    """Who builds an environment on this nimbus now."""

    def __init__(self, per_user: int, total: int) -> None:
        self.per_user = per_user
        self.total = total
        self._lock = threading.Lock()
        self._by_user: dict[str, int] = {}

    def running(self) -> int:
        with self._lock:
            return sum(self._by_user.values())

    @contextmanager
    def hold(self, owner: str | None) -> Iterator[None]:
        """A slot for one build of ``owner``'s for as long as the block runs; TooBusy
        at once when every slot of theirs, or of the cluster, is taken."""
        who = owner or NO_USER
        with self._lock:
            if self._by_user.get(who, 0) >= self.per_user:
                msg = (f"{self.per_user} environment build(s) of {who}'s already run on nimbus "
                       f"(nimbus.env.builds.per.user): submit again when one has finished")
                raise TooBusy(msg)
            if sum(self._by_user.values()) >= self.total:
                msg = (f"nimbus already runs {self.total} environment builds (nimbus.env.builds.max): "
                       f"submit again shortly")
                raise TooBusy(msg)
            self._by_user[who] = self._by_user.get(who, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                self._by_user[who] -= 1
                if not self._by_user[who]:
                    del self._by_user[who]


def bytes_of(owner: str | None, records: Iterable[Mapping[str, Any]], size: Callable[[str], int],
             key_of: Callable[[Any], str], also: Iterable[str] = ()) -> int:
    """The bytes of the environments ``owner``'s topologies use (each counted once), and of
    ``also``'s keys."""
    keys = set(also)
    for record in records:
        if record.get("owner") != owner:
            continue
        try:
            requirements = from_record(record.get("requirements"))
        except SquallError:
            continue
        if requirements is not None:
            keys.add(key_of(requirements))
    return sum(size(key) for key in keys)


def check_disk(owner: str | None, used: int, cap: int, adding: int = 0) -> None:
    """Forbidden when ``owner``'s environments, with ``adding`` more bytes, pass ``cap``
    (0: none); before a build ``adding`` is 0 and reaching the cap is enough."""
    if not cap or (used + adding <= cap if adding else used < cap):
        return
    who = owner or NO_USER
    msg = (f"the environments of {who}'s topologies would take {used + adding} bytes on nimbus, over "
           f"nimbus.env.max.bytes.per.user ({cap}): kill a topology whose environment is no longer needed")
    raise Forbidden(msg)
