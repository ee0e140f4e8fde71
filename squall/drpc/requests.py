"""A DRPC server's requests, as a pure core: Storm's DRPC.java without threads or a clock
of its own.  The shells (squall.drpc_server on an event loop, :class:`~squall.drpc.LocalDRPC`
under a lock) call it and wake whoever it names.

* ``submit``: a client's call becomes a request (a random id, its function, its args)
  queued for its function; handed straight to a fetcher already waiting for that
  function, if one is (the shell wakes it);
* ``fetch`` / ``wait_for_request``: a topology takes the oldest request of a function,
  or waits for one (long polling); a fetcher that went away is forgotten
  (``stop_waiting``), and a request handed to one that had gone goes back to the head
  of its queue (``requeue``);
* ``result`` / ``fail``: the topology answers a request by id; it is settled once and
  forgotten (a late or unknown answer is ignored, as Storm does);
* ``expire``: requests older than the timeout settle with ``SERVER_TIMEOUT``, whether
  still queued or fetched by a topology that never answered; ``cancel`` drops the
  request of a client that went away; ``close`` settles everything with
  ``SERVER_SHUTDOWN``.

Each settled request carries its outcome (``result`` or ``error``) and the object the
shell gave as its ``waiter``.  Requests expire in the order they came, so expiry looks
only at the oldest.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from squall.errors import DRPCExecutionError

FAILED_REQUEST = "FAILED_REQUEST"
SERVER_TIMEOUT = "SERVER_TIMEOUT"
SERVER_SHUTDOWN = "SERVER_SHUTDOWN"
INTERNAL_ERROR = "INTERNAL_ERROR"


def check_call(function: Any, args: Any) -> None:
    """A DRPC call's function and arguments as Storm's: two strings, the function not empty;
    TypeError naming the bad one."""
    if not isinstance(function, str) or not function:
        msg = f"a DRPC function is a non-empty string, got {function!r}"
        raise TypeError(msg)
    if not isinstance(args, str):
        msg = f"DRPC arguments are a string (as Storm's), got {type(args).__name__} {args!r}"
        raise TypeError(msg)


def new_request_id() -> str:
    """Random, never a counter: an answer meant for a request of an earlier server (or a
    guess) cannot reach another's."""
    return secrets.token_hex(8)


@dataclass(eq=False)
class Request:
    id: str
    function: str
    args: str
    deadline: float
    waiter: Any = None  # the shell's: whoever waits for the outcome
    fetched: bool = False
    result: str | None = None
    error: DRPCExecutionError | None = None

    @property
    def settled(self) -> bool:
        return self.result is not None or self.error is not None


class RequestQueues:
    def __init__(self, timeout_secs: float, new_id: Callable[[], str] = new_request_id) -> None:
        self.timeout_secs = timeout_secs
        self.new_id = new_id
        # function -> its queued requests, oldest first (by id, so one leaves in O(1))
        self.queues: dict[str, OrderedDict[str, Request]] = {}
        # every unsettled request, queued or fetched, oldest first
        self.requests: OrderedDict[str, Request] = OrderedDict()
        # function -> the fetchers waiting for a request of it, longest waiting first
        self.fetchers: dict[str, OrderedDict[Any, None]] = {}
        self.closed = False

    def __len__(self) -> int:
        return len(self.requests)

    # -- clients ---------------------------------------------------------------------------------

    def submit(self, function: str, args: str, now: float, waiter: Any = None) -> tuple[Request, Any]:
        """A new request, and the waiting fetcher it went to (None: it is queued).  A closed
        core settles it at once with SERVER_SHUTDOWN."""
        request = Request(self.new_id(), function, args, now + self.timeout_secs, waiter)
        if self.closed:
            request.error = DRPCExecutionError("the DRPC server is shutting down", SERVER_SHUTDOWN)
            return request, None
        self.requests[request.id] = request
        return request, self._place(request, at_head=False)

    def cancel(self, request_id: str) -> Request | None:
        """The client went away: the request is forgotten wherever it is."""
        request = self.requests.pop(request_id, None)
        if request is not None:
            self._unqueue(request)
        return request

    # -- topologies ------------------------------------------------------------------------------

    def fetch(self, function: str) -> Request | None:
        """The oldest queued request of ``function``, now fetched; None if there is none."""
        queue = self.queues.get(function)
        if not queue:
            return None
        _id, request = queue.popitem(last=False)
        if not queue:
            del self.queues[function]
        request.fetched = True
        return request

    def wait_for_request(self, function: str, fetcher: Any) -> Request | None:
        """A queued request at once, else ``fetcher`` waits for the next one (None)."""
        request = self.fetch(function)
        if request is None and not self.closed:
            self.fetchers.setdefault(function, OrderedDict())[fetcher] = None
        return request

    def stop_waiting(self, function: str, fetcher: Any) -> None:
        waiting = self.fetchers.get(function)
        if waiting is not None:
            waiting.pop(fetcher, None)
            if not waiting:
                del self.fetchers[function]

    def requeue(self, request: Request) -> Any:
        """A request handed to a fetcher that had gone: back to the head of its queue (or
        to another waiting fetcher, returned), unless it was settled meanwhile."""
        if request.settled or request.id not in self.requests:
            return None
        request.fetched = False
        return self._place(request, at_head=True)

    def result(self, request_id: str, result: str) -> Request | None:
        """Settle the request with its result; None when no such request is waiting."""
        request = self._settle(request_id)
        if request is not None:
            request.result = result
        return request

    def fail(self, request_id: str, message: str | None = None) -> Request | None:
        """Settle the request as failed (FAILED_REQUEST, ``message`` the topology's reason)."""
        request = self._settle(request_id)
        if request is not None:
            reason = "the topology failed the request" + (f": {message}" if message else "")
            request.error = DRPCExecutionError(f"{reason} (function {request.function!r})", FAILED_REQUEST)
        return request

    # -- time and shutdown -----------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        oldest = next(iter(self.requests.values()), None)
        return None if oldest is None else oldest.deadline

    def expire(self, now: float) -> list[Request]:
        """The requests whose time is up, settled with SERVER_TIMEOUT."""
        expired = []
        while self.requests:
            request = next(iter(self.requests.values()))
            if request.deadline > now:
                break
            self._settle(request.id)
            where = "fetched by a topology that did not answer" if request.fetched else \
                "no topology fetched it (is one serving this function?)"
            request.error = DRPCExecutionError(
                f"request to function {request.function!r} timed out after {self.timeout_secs:g} s "
                f"(drpc.request.timeout.secs): {where}", SERVER_TIMEOUT)
            expired.append(request)
        return expired

    def close(self) -> tuple[list[Request], list[Any]]:
        """Every request settled with SERVER_SHUTDOWN, and every waiting fetcher, to wake."""
        self.closed = True
        settled = []
        for request_id in list(self.requests):
            request = self._settle(request_id)
            if request is not None:
                request.error = DRPCExecutionError("the DRPC server is shutting down", SERVER_SHUTDOWN)
                settled.append(request)
        fetchers = [f for waiting in self.fetchers.values() for f in waiting]
        self.fetchers.clear()
        return settled, fetchers

    # -- inside ----------------------------------------------------------------------------------

    def _place(self, request: Request, at_head: bool) -> Any:
        waiting = self.fetchers.get(request.function)
        if waiting:
            fetcher, _ = waiting.popitem(last=False)
            if not waiting:
                del self.fetchers[request.function]
            request.fetched = True
            return fetcher
        queue = self.queues.setdefault(request.function, OrderedDict())
        queue[request.id] = request
        if at_head:
            queue.move_to_end(request.id, last=False)
        return None

    def _settle(self, request_id: str) -> Request | None:
        request = self.requests.pop(request_id, None)
        if request is not None:
            self._unqueue(request)
        return request

    def _unqueue(self, request: Request) -> None:
        queue = self.queues.get(request.function)
        if queue is not None and queue.pop(request.id, None) is not None and not queue:
            del self.queues[request.function]
