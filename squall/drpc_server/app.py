"""The DRPC server's HTTP app: Storm's client form and the topologies' invocations, over
the request queues (squall.drpc.requests) kept on the server's event loop.

Clients (Storm's DRPCResource)::

    GET  /drpc/<function>/<args>    the result text (200); args percent-encoded, may hold '/'
    GET  /drpc/<function>           the same with empty args
    POST /drpc/<function>           the body is the args

A request that gets no result is answered with Storm's status and body:
``{"error": TYPE, "errorMessage": reason}``, 400 when the topology failed it
(FAILED_REQUEST), 504 when it timed out (SERVER_TIMEOUT, after
``drpc.request.timeout.secs``), 503 when the server is shutting down.  A client that
goes away takes its request with it.

Topologies (Storm's DistributedRPCInvocations, as HTTP)::

    POST /invocations/fetchRequest/<function>?wait=S   {"request_id", "func_args"}: the oldest
                                                       request, waiting up to S s (at most
                                                       MAX_WAIT_SECS) for one; empty strings if none
    POST /invocations/result/<request id>              the body is the result
    POST /invocations/failRequest/<request id>         the body, if any, is the reason

A request handed to a fetch whose client is gone goes back to the head of its queue.

Who may (secure mode; squall.drpc_server.invokers): a user of the keyring calls
functions (only those ``drpc.authorizer.acl`` lets them, when it names the function;
``nimbus.admins`` all), a topology's DRPC credential fetches and answers the functions
its owner serves (squall.drpc_server.ownership: 403 otherwise, the request untouched);
neither may do the other's part.  Insecure: anyone, as Storm without an authorizer.

How many (squall.drpc_server.limits): a user has at most ``drpc.max.pending.per.user``
calls waiting, and all users together ``drpc.max.pending.unserved`` for functions no
topology serves; past either a call is answered 429 at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

import anyio
import structlog
from prometheus_client.registry import CollectorRegistry
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from squall.clock import Clock
from squall.drpc.requests import (
    FAILED_REQUEST,
    SERVER_SHUTDOWN,
    SERVER_TIMEOUT,
    RequestQueues,
)
from squall.drpc.requests import (
    Request as DrpcRequest,
)
from squall.drpc_server.invokers import TOPOLOGY
from squall.drpc_server.limits import CallLimits
from squall.drpc_server.owners import FunctionOwners
from squall.drpc_server.ownership import Refuse
from squall.errors import ApiError, Refused
from squall.httpd.answers import JsonAnswer, status_of
from squall.httpd.auth import Gate
from squall.httpd.guard import Guard

log = structlog.get_logger("squall.drpc_server")

MAX_WAIT_SECS = 30.0  # the longest a fetch may wait at the server for a request
STATUS = {FAILED_REQUEST: 400, SERVER_SHUTDOWN: 503, SERVER_TIMEOUT: 504}  # Storm's DRPCExceptionMapper


class DrpcService:
    """The request queues and their waiters, touched only on the event loop."""

    def __init__(self, timeout_secs: float, clock: Clock | None = None,
                 limits: CallLimits | None = None) -> None:
        self.core = RequestQueues(timeout_secs)
        self.clock = clock or Clock()
        self.limits = limits or CallLimits(per_user=2**31, unserved=2**31)
        self.executed = 0
        self.timed_out = 0

    async def execute(self, function: str, args: str, gone: asyncio.Future[None]) -> DrpcRequest | None:
        """The request, settled; None when the client went away first."""
        loop = asyncio.get_running_loop()
        settled = loop.create_future()
        request, fetcher = self.core.submit(function, args, self.clock.now(), waiter=settled)
        self.executed += 1
        if request.settled:
            return request
        if fetcher is not None:
            _wake(fetcher, request)
        while not settled.done():
            remaining = request.deadline - self.clock.now()
            if remaining <= 0:
                for expired in self.core.expire(self.clock.now()):
                    self.timed_out += 1
                    _wake(expired.waiter, None)
                continue
            await asyncio.wait({settled, gone}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            if gone.done() and not settled.done():
                self.core.cancel(request.id)
                return None
        return request

    async def fetch(self, function: str, wait: float, gone: asyncio.Future[None]) -> DrpcRequest | None:
        loop = asyncio.get_running_loop()
        handed: asyncio.Future[DrpcRequest | None] = loop.create_future()
        self.limits.fetching(function, self.clock.now())
        request = self.core.wait_for_request(function, handed)
        if request is not None or wait <= 0 or self.core.closed:
            self.core.stop_waiting(function, handed)
            return request
        await asyncio.wait({handed, gone}, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
        self.limits.fetching(function, self.clock.now())  # served all along: a long poll's end counts
        if not handed.done():
            self.core.stop_waiting(function, handed)
            return None
        request = handed.result()
        if request is not None and gone.done():
            # Handed to a fetch that is gone: the next one takes it.
            _wake(self.core.requeue(request), request)
            return None
        return request

    def result(self, request_id: str, result: str) -> bool:
        request = self.core.result(request_id, result)
        if request is not None:
            _wake(request.waiter, None)
        return request is not None

    def fail(self, request_id: str, message: str | None) -> bool:
        request = self.core.fail(request_id, message)
        if request is not None:
            _wake(request.waiter, None)
        return request is not None

    def close(self) -> None:
        """Every waiting client gets SERVER_SHUTDOWN, every waiting fetch nothing."""
        settled, fetchers = self.core.close()
        for request in settled:
            _wake(request.waiter, None)
        for fetcher in fetchers:
            _wake(fetcher, None)


def _wake(future: Any, value: Any) -> None:
    if isinstance(future, asyncio.Future) and not future.done():
        future.set_result(value)


async def _until_gone(request: Request, gone: asyncio.Future[None]) -> None:
    """Completes ``gone`` when the client closes its connection (the body, if any, is read)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            if not gone.done():
                gone.set_result(None)
            return


class Watching:
    """``async with Watching(request) as gone``: ``gone`` completes if the client leaves."""

    def __init__(self, request: Request) -> None:
        self.request = request
        self.gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> asyncio.Future[None]:
        self.task = asyncio.get_running_loop().create_task(_until_gone(self.request, self.gone))
        return self.gone

    async def __aexit__(self, *exc: object) -> None:
        if self.task is not None:
            self.task.cancel()


# -- requests in -------------------------------------------------------------------------------


def _state(request: Request) -> Any:
    return request.app.state


def _principal(request: Request) -> str | None:
    return getattr(request.state, "user", None)


def _segments(request: Request, prefix: str) -> list[str]:
    """The path after ``prefix``, split on '/' as sent, each segment percent-decoded on its own."""
    raw = (request.scope.get("raw_path") or request.scope["path"].encode()).decode("latin-1")
    rest = raw[len(prefix):] if raw.startswith(prefix) else ""
    try:
        return [unquote(s, errors="strict") for s in rest.split("/")] if rest else []
    except UnicodeDecodeError:
        raise ApiError(400, "the path's percent-encoded bytes are not UTF-8") from None


async def _body(request: Request) -> str:
    """The body as text, within drpc.max_buffer_size and the request's time."""
    state = _state(request)
    limit = state.max_buffer
    data = bytearray()
    try:
        with anyio.fail_after(state.request_timeout):
            async for chunk in request.stream():
                data += chunk
                if len(data) > limit:
                    raise ApiError(413, f"request body over {limit} bytes (drpc.max_buffer_size)")
    except TimeoutError:
        raise ApiError(408, "the request body did not arrive in time") from None
    except ClientDisconnect:
        raise ApiError(400, "the client went away while sending the body") from None
    try:
        return data.decode()
    except UnicodeDecodeError as e:
        raise ApiError(400, f"the body is not UTF-8 text: {e}") from None


def _may_execute(request: Request, function: str) -> None:
    state = _state(request)
    if state.gate is None:
        return
    user = _principal(request) or ""
    if user.startswith(TOPOLOGY):
        raise ApiError(403, "a topology's DRPC credential fetches and answers requests; it may not call "
                            "functions (a user's token may)")
    acl = (state.conf.get("drpc.authorizer.acl") or {}).get(function)
    if acl is None or user in (state.conf.get("nimbus.admins") or ()):
        return
    allowed = acl.get("client.users") if isinstance(acl, Mapping) else None
    if not allowed or user not in allowed:
        raise ApiError(403, f"user {user!r} may not call DRPC function {function!r} "
                            "(not in its client.users in drpc.authorizer.acl, not in nimbus.admins)")


def _may_invoke(request: Request) -> None:
    if _state(request).gate is None:
        return
    if not (_principal(request) or "").startswith(TOPOLOGY):
        raise ApiError(403, "only a topology's DRPC credential may fetch and answer requests "
                            "(users call /drpc/<function>)")


async def _may_serve(request: Request, function: str, claiming: bool) -> None:
    """403 (or 429, 503) unless the topology's owner serves ``function``; ``claiming``: a fetch,
    which may make its owner the function's first."""
    owners: FunctionOwners | None = _state(request).owners
    if owners is None:
        return
    verdict = await owners.verdict((_principal(request) or "")[len(TOPOLOGY):], function, claiming)
    if isinstance(verdict, Refuse):
        raise verdict.kind(verdict.reason)


def _caller(request: Request) -> str:
    """Whom a call counts against: its user, or (insecure) its address."""
    user = _principal(request)
    if user:
        return user
    client = request.scope.get("client") or ("?",)
    return f"anonymous@{client[0]}"


def _outcome(request: DrpcRequest) -> Response:
    if request.result is not None:
        return PlainTextResponse(request.result)
    error = request.error
    assert error is not None
    return JsonAnswer({"error": error.type, "errorMessage": str(error)}, STATUS.get(error.type, 500))


async def execute_get(request: Request) -> Response:
    parts = _segments(request, "/drpc/")
    if not parts or not parts[0]:
        raise ApiError(404, "call a DRPC function as /drpc/<function>/<args>")
    return await _execute(request, parts[0], "/".join(parts[1:]))


async def execute_post(request: Request) -> Response:
    parts = _segments(request, "/drpc/")
    if len(parts) != 1 or not parts[0]:
        raise ApiError(404, "POST a DRPC call to /drpc/<function>, the arguments as the body")
    return await _execute(request, parts[0], await _body(request))


async def _execute(request: Request, function: str, args: str) -> Response:
    _may_execute(request, function)
    state = _state(request)
    if len(args.encode()) > state.max_buffer:
        raise ApiError(413, f"arguments over {state.max_buffer} bytes (drpc.max_buffer_size)")
    service = state.service
    ticket = service.limits.admit(_caller(request), function, service.clock.now(),
                                  waiting=function in service.core.fetchers)
    if isinstance(ticket, Refuse):
        raise ticket.kind(ticket.reason)
    try:
        async with Watching(request) as gone:
            settled = await service.execute(function, args, gone)
    finally:
        service.limits.release(ticket)
    if settled is None:
        return Response(status_code=499)  # nobody is there to read it
    return _outcome(settled)


async def invocations(request: Request) -> Response:
    _may_invoke(request)
    parts = _segments(request, "/invocations/")
    kind, name = (parts[0], parts[1]) if len(parts) == 2 and parts[1] else ("", "")
    service = _state(request).service
    if kind == "fetchRequest":
        try:
            wait = min(MAX_WAIT_SECS, max(0.0, float(request.query_params.get("wait") or 0)))
        except ValueError:
            raise ApiError(400, f"wait must be seconds, got {request.query_params.get('wait')!r}") from None
        await _may_serve(request, name, claiming=True)
        async with Watching(request) as gone:
            found = await service.fetch(name, wait, gone)
        if found is None:
            return JsonAnswer({"request_id": "", "func_args": ""})
        return JsonAnswer({"request_id": found.id, "func_args": found.args})
    if kind in ("result", "failRequest"):
        pending = service.core.requests.get(name)
        if pending is not None:  # an unknown id settles nothing, whoever sends it
            await _may_serve(request, pending.function, claiming=False)
        body = await _body(request)
        settled = service.result(name, body) if kind == "result" else service.fail(name, body or None)
        return JsonAnswer({"settled": settled})
    raise ApiError(404, "a topology calls /invocations/fetchRequest/<function>, /invocations/result/<id> "
                        "or /invocations/failRequest/<id>")


async def api_error(request: Request, exc: Exception) -> Response:
    status = status_of(exc)
    if status == 500:
        log.error("drpc request failed", path=request.url.path, error=repr(exc))
    return JsonAnswer({"error": str(exc)}, status, headers={"Connection": "close"})


ROUTES = [
    Route("/drpc/{rest:path}", execute_get, methods=["GET"]),
    Route("/drpc/{rest:path}", execute_post, methods=["POST"]),
    Route("/invocations/{rest:path}", invocations, methods=["POST"]),
]


def create_app(service: DrpcService, conf: Mapping[str, Any], gate: Gate | None,
               owners: FunctionOwners | None = None) -> ASGIApp:
    """``owners``: who serves which function (None: any topology serves any, insecure)."""
    app = Starlette(routes=ROUTES,
                    exception_handlers={ApiError: api_error, Refused: api_error, Exception: api_error})
    app.router.redirect_slashes = False
    state: Any = app.state
    state.service, state.conf, state.gate, state.owners = service, conf, gate, owners
    state.max_buffer = int(conf["drpc.max_buffer_size"])
    state.request_timeout = float(conf["nimbus.http.timeout.secs"])
    state.registry = CollectorRegistry()
    # Calls and the spouts' polls are the server's traffic: only refusals leave an audit line.
    return Guard(app, gate, int(conf["drpc.max.requests"]), audit_successes=False)

