"""LocalDRPC: a DRPC server inside this process, for local mode and tests (Storm's).

    drpc = LocalDRPC()
    with LocalCluster() as cluster:
        cluster.submit("exclaim", builder.create_local_topology(drpc))
        assert drpc.execute("exclamation", "hello") == "hello!"

The request queues are the DRPC server's own (squall.drpc.requests), under a lock: a
client's ``execute`` blocks until the topology answers, fails the request, or
``drpc.request.timeout.secs`` passes (then DRPCExecutionError); the topology's spouts
find it by its ``service_id`` (what a spec carries) and fetch, answer and fail through
:class:`~squall.drpc.invocations.DRPCInvocations`, or these methods directly.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Mapping
from typing import Any

from squall import config as config_mod
from squall.clock import Clock
from squall.drpc.invocations import LOCAL_ID_PREFIX, register_local, unregister_local
from squall.drpc.requests import RequestQueues, check_call


class LocalDRPC:
    def __init__(self, conf: Mapping[str, Any] | None = None, clock: Clock | None = None) -> None:
        merged = config_mod.merge(dict(conf or {}))
        self.clock = clock or Clock()
        self.core = RequestQueues(float(merged["drpc.request.timeout.secs"]))
        self._cond = threading.Condition()
        self.service_id = f"{LOCAL_ID_PREFIX}{secrets.token_hex(6)}"
        register_local(self, self.service_id)

    def __enter__(self) -> LocalDRPC:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return f"LocalDRPC({self.service_id})"

    # -- the client's side ---------------------------------------------------------------------

    def execute(self, function: str, args: str) -> str:
        """The topology's answer for ``function(args)``; DRPCExecutionError when the topology
        fails the request, it times out, or this LocalDRPC shuts down."""
        check_call(function, args)
        with self._cond:
            request, _ = self.core.submit(function, args, self.clock.now())
            self._cond.notify_all()  # a spout may be waiting for it
            while not request.settled:
                remaining = request.deadline - self.clock.now()
                if remaining <= 0:
                    self.core.expire(self.clock.now())
                    self._cond.notify_all()
                    continue
                self._cond.wait(min(remaining, 0.5))
        if request.error is not None:
            raise request.error
        assert request.result is not None
        return request.result

    # -- the topology's side (squall.drpc.invocations.LocalEndpoint) ------------------------------

    def fetch_request(self, function: str, timeout: float = 0.0) -> tuple[str, str] | None:
        """(request id, args) of the oldest request of ``function``, waiting at most ``timeout``
        seconds for one; None when none came."""
        deadline = self.clock.now() + max(0.0, timeout)
        with self._cond:
            while True:
                request = self.core.fetch(function)
                if request is not None:
                    return request.id, request.args
                remaining = deadline - self.clock.now()
                if remaining <= 0 or self.core.closed:
                    return None
                self._cond.wait(min(remaining, 0.5))

    def result(self, request_id: str, result: str) -> None:
        with self._cond:
            self.core.result(request_id, result)
            self._cond.notify_all()

    def fail_request(self, request_id: str, message: str | None = None) -> None:
        with self._cond:
            self.core.fail(request_id, message)
            self._cond.notify_all()

    def shutdown(self) -> None:
        """Every waiting client gets SERVER_SHUTDOWN; spouts find it gone."""
        unregister_local(self.service_id)
        with self._cond:
            self.core.close()
            self._cond.notify_all()

    close = shutdown
