"""DRPCSpout: a function's requests, from DRPC servers into a topology (Storm's).

    class Exclaim(Topology):
        requests = DRPCSpout.spec(function="exclamation")          # or local_drpc=drpc
        exclaim = ExclaimBolt.spec(inputs=[requests])               # [args, return_info] in,
        answer = ReturnResults.spec(inputs=[exclaim])               # [result, return_info] out

It emits ``[args, return_info]`` with the return info as message id: a tuple tree that
fails or times out fails the request at its server, whose client gets
DRPCExecutionError at once instead of waiting for the request's timeout.

The executor thread never waits for a server: one helper thread per server this task
fetches from (squall.drpc.invocations) long-polls it for a request whenever none is
waiting to be emitted and the topology is active, so a request reaches the spout within
milliseconds and no request is taken from a server that this task could not emit now.
Failures go to the server from a helper thread too.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from squall.drpc.invocations import DRPCInvocations, DRPCRequest, Endpoint, service_id_of
from squall.errors import DRPCExecutionError, TopologyValidationError
from squall.topology.component import ComponentSpec, Spout, spout_spec

LONG_POLL_SECS = 5.0  # a fetch waits at the server this long for a request before it asks again
LOCAL_POLL_SECS = 0.5  # at a LocalDRPC: a stopped spout's thread is gone within this
RETRY_SECS = (0.1, 5.0)  # the backoff, first and longest, after a server did not answer


class DRPCSpout(Spout):
    outputs = ["args", "return_info"]

    @classmethod
    def spec(cls, function: str | None = None, local_drpc: Any = None,  # type: ignore[override]
             name: str | None = None, par: int = 1, tasks: int | None = None,
             config: Mapping[str, Any] | None = None, **options: Any) -> ComponentSpec:
        """``function``: the DRPC function whose requests it takes; ``local_drpc``: a
        LocalDRPC of this process to take them from (local mode), else ``drpc.servers``."""
        if not isinstance(function, str) or not function:
            msg = f"DRPCSpout.spec: function= names the DRPC function (a non-empty string), got {function!r}"
            raise TopologyValidationError(msg)
        try:
            local = service_id_of(local_drpc)
        except TypeError as e:
            msg = f"DRPCSpout.spec: {e}"
            raise TopologyValidationError(msg) from e
        options.update(function=function, local_drpc=local)
        return spout_spec(cls, f"spout {cls.__name__}", name, par, tasks, config, options)

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.function: str = self.options["function"]
        self.invocations = DRPCInvocations.for_task(conf, context, self.options.get("local_drpc"))
        self.ready: deque[DRPCRequest] = deque()
        self._cond = threading.Condition()
        self._stopped = False
        self._active = False
        self._failing = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"drpc-fail-{context.task_id}")
        self._fetchers = [threading.Thread(target=self._fetch_loop, args=(endpoint,), daemon=True,
                                           name=f"drpc-fetch-{context.task_id}-{i}")
                          for i, endpoint in enumerate(self.invocations.endpoints())]
        for thread in self._fetchers:
            thread.start()

    # -- the executor's thread -----------------------------------------------------------------

    def next_tuple(self) -> None:
        ready = self.ready
        if not ready:
            return
        while ready:
            request = ready.popleft()
            self.emit([request.func_args, request.return_info], tup_id=request.return_info)
        with self._cond:
            self._cond.notify_all()  # room again: the fetchers may take the next request

    def fail(self, tup_id: Any) -> None:
        reason = "its tuple tree failed or timed out in the topology"
        try:
            self._failing.submit(self._fail_request, tup_id, reason)
        except RuntimeError:  # closed: no thread left to hand it to
            self._fail_request(tup_id, reason)

    def activate(self) -> None:
        with self._cond:
            self._active = True
            self._cond.notify_all()

    def deactivate(self) -> None:
        with self._cond:
            self._active = False

    def close(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        # What was fetched and never emitted: its clients hear now, not at the timeout.
        while self.ready:
            self._fail_request(self.ready.popleft().return_info, "the spout that fetched it stopped")
        self._failing.shutdown(wait=True)
        # Closing the connections ends the fetches waiting at a server; a server puts back
        # a request it had handed to a fetch whose client went away.
        self.invocations.close()
        for thread in self._fetchers:
            thread.join(LOCAL_POLL_SECS + 0.5)

    # -- helper threads ------------------------------------------------------------------------

    def _fetch_loop(self, endpoint: Endpoint) -> None:
        backoff = RETRY_SECS[0]
        reported = False
        local = endpoint.key[1] == 0
        while True:
            with self._cond:
                while not self._stopped and (not self._active or self.ready):
                    self._cond.wait(1.0)
                if self._stopped:
                    return
            try:
                request = endpoint.fetch_request(self.function, LOCAL_POLL_SECS if local else LONG_POLL_SECS)
            except Exception as e:  # noqa: BLE001 - a fetch thread outlives any one failure
                if self._stopped:  # close() ended the fetch under it
                    return
                if not isinstance(e, DRPCExecutionError):
                    self.logger.exception("fetching a DRPC request failed")
                if not reported:  # once per outage, not once per retry
                    reported = True
                    self.call_soon(lambda e=e: self.report_error(e))
                with self._cond:
                    self._cond.wait(backoff)
                backoff = min(backoff * 2, RETRY_SECS[1])
                continue
            backoff, reported = RETRY_SECS[0], False
            if request is None:
                continue
            with self._cond:
                if not self._stopped:
                    self.ready.append(request)
                    continue
            self._fail_request(request.return_info, "the spout that fetched it stopped")
            return

    def _fail_request(self, return_info: str, reason: str) -> None:
        try:
            self.invocations.fail_request(return_info, reason)
        except (DRPCExecutionError, ValueError) as e:
            self.logger.warning("could not fail a DRPC request at its server", error=str(e))
