"""Trident's DRPC streams: ``TridentTopology.new_drpc_stream(function, local_drpc)`` is a
batch group of its own whose every batch is one request (its ``args`` the one tuple), and
whose last operation's tuples go back to the client as JSON text, as Storm's
``[[2]]``.

The spout's coordinator takes requests from the DRPC servers (or the LocalDRPC) in a
thread of its own, long polling, and a batch starts when one is there; the request is the
batch's metadata, so a replayed batch answers the same request.  The emitter's first task
emits ``[args]``, and the request's return info on a stream of its own, to the one task
that gathers the batch's results and answers (:class:`DRPCReturn`).
"""

from __future__ import annotations

import json
import queue
import threading
from typing import Any

import structlog

from squall.drpc.invocations import DRPCInvocations
from squall.errors import ConfigError, DRPCExecutionError
from squall.trident.spout import BatchSpout

log = structlog.get_logger("squall.trident.drpc")

RETURN_STREAM = "drpcreturn"  # the emitter's stream of each request's return info
FETCH_SECS = 1.0  # how long one fetch waits at a server for a request (long polling)
REMEMBERED = 10_000  # txids an emitter remembers having emitted


class DRPCBatchSpout(BatchSpout):
    """The spout of a DRPC stream: one request per batch."""

    output_fields = ["args"]

    def __init__(self, function: str, local_drpc: str | None) -> None:
        self.function = function
        self.local_drpc = local_drpc  # a LocalDRPC's service id, or None: drpc.servers
        self.conf: dict[str, Any] = {}
        self.context: Any = None
        self.requests: queue.Queue[Any] = queue.Queue()
        self.stop = threading.Event()
        self.fetcher: threading.Thread | None = None
        self.invocations: DRPCInvocations | None = None
        self.pending: dict[int, str] = {}  # txid -> the return info of its request, until it commits
        self.emitted: dict[int, None] = {}  # txids this emitter task has emitted (newest last)

    def __getstate__(self) -> dict[str, Any]:
        return {"function": self.function, "local_drpc": self.local_drpc}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["function"], state["local_drpc"])  # type: ignore[misc]

    def open(self, conf: dict[str, Any], context: Any) -> None:
        self.conf, self.context = conf, context

    # -- the coordinator's side ------------------------------------------------------------------

    def is_ready(self) -> bool:
        if self.fetcher is None:  # only the coordinator asks: its fetching starts here
            try:
                self.invocations = DRPCInvocations.for_task(self.conf, self.context, self.local_drpc)
            except ConfigError as e:
                # squall local of a file whose DRPC stream names no LocalDRPC: the rest runs.
                log.warning("DRPC stream without a DRPC server: no request will come", function=self.function,
                            reason=str(e))
                self.fetcher = threading.Thread()  # asked once
                return False
            self.fetcher = threading.Thread(target=self._fetch, name=f"drpc-fetch-{self.function}",
                                            daemon=True)
            self.fetcher.start()
        return not self.requests.empty()

    def _fetch(self) -> None:
        assert self.invocations is not None
        while not self.stop.is_set():
            try:
                request = self.invocations.fetch_request(self.function, FETCH_SECS)
            except DRPCExecutionError:
                self.stop.wait(FETCH_SECS)  # a server away: asked again in a moment
                continue
            if request is not None:
                self.requests.put(request)

    def batch_metadata(self, txid: int, previous: Any) -> Any:
        try:
            request = self.requests.get_nowait()
        except queue.Empty:
            return {}
        self.pending[txid] = request.return_info
        return {"args": request.func_args, "return": request.return_info}

    def success(self, txid: int) -> None:
        self.pending.pop(txid, None)

    def failed(self, txid: int) -> None:
        """The request's batch failed: its client hears so now (as Storm's DRPC spout fails the
        request), not at the request's timeout; the replay's answer, if any, finds it gone."""
        info = self.pending.pop(txid, None)
        if info is not None and self.invocations is not None:
            try:
                self.invocations.fail_request(info, "the Trident batch computing it failed")
            except DRPCExecutionError as e:
                log.warning("could not fail a DRPC request", function=self.function, error=str(e))

    # -- the emitters' side ------------------------------------------------------------------------

    def emit_batch(self, batch_id: int, collector: Any) -> None:
        meta = collector.metadata or {}
        if batch_id in self.emitted:
            # A replay: its request was failed to its client when the batch failed (failed()),
            # as Storm's DRPC spout does; the batch goes through empty, so that a request that
            # always fails cannot hold the function's later requests up for ever.
            return
        self.emitted[batch_id] = None
        while len(self.emitted) > REMEMBERED:
            del self.emitted[next(iter(self.emitted))]
        if collector.task_index == 0 and "return" in meta:
            collector.emit([meta["args"]])
            collector.emit_to(RETURN_STREAM, [meta["return"]])

    def close(self) -> None:
        self.stop.set()
        if self.fetcher is not None and self.fetcher.ident is not None:
            self.fetcher.join(FETCH_SECS + 5)
        if self.invocations is not None:
            self.invocations.close()


class DRPCReturn:
    """The one task of a DRPC stream that answers: the batch's results (side 0) as JSON text
    to the request its return info (side 1) names."""

    def __init__(self) -> None:
        self.invocations: DRPCInvocations | None = None

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.invocations = DRPCInvocations.for_results(conf, context)

    def complete(self, batch_id: Any, rows: list[tuple[int, list[Any]]]) -> None:
        results = [values for side, values in rows if side == 0]
        infos = [values[0] for side, values in rows if side == 1]
        if not infos or self.invocations is None:
            return
        self.invocations.result(infos[0], json.dumps(results, separators=(",", ":"), default=str))

    def cleanup(self) -> None:
        if self.invocations is not None:
            self.invocations.close()
