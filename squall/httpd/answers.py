"""Requests in, answers out, for every daemon's routes: JSON answers with their secrets
redacted, Storm's error shape (``{"error": message}``) for a refusal, request bodies read
within their limits, and the services' (blocking) calls run in worker threads."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import structlog
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from squall.errors import (
    ApiError,
    Conflict,
    Forbidden,
    InvalidRequest,
    NotFound,
    Refused,
    TooBusy,
    Unavailable,
)
from squall.httpd.auth import Unauthorized
from squall.security.redact import redact_answer

log = structlog.get_logger("squall.httpd")

MAX_BODY = 64 * 1024 * 1024
T = TypeVar("T")

class JsonAnswer(Response):
    """JSON as nimbus has always written it (``json.dumps``' spacing), secrets redacted."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return json.dumps(redact_answer(content)).encode()


# The HTTP status of each kind of refusal the services raise (squall.errors).
REFUSED_STATUS: dict[type[Refused], int] = {
    InvalidRequest: 400,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    TooBusy: 429,
    Unavailable: 503,
    Refused: 400,  # of no kind above: refused as it stands
}


def status_of(error: BaseException) -> int:
    """The HTTP status a request that raised ``error`` is answered with: a Refused kind's
    (or the nearest kind it derives from), an ApiError's own, else 500."""
    if isinstance(error, ApiError):
        return error.status
    if isinstance(error, Refused):
        return next(REFUSED_STATUS[kind] for kind in type(error).__mro__ if kind in REFUSED_STATUS)
    return 500


def refusal(status: int, message: str, **extra: Any) -> JsonAnswer:
    """``{"error": message}``; the connection closes after it (a body may be left unread)."""
    headers = {"Connection": "close", **extra.pop("headers", {})}
    return JsonAnswer({"error": message, **extra}, status, headers=headers)


async def call(request: Request, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a worker thread (the cluster's calls block); a bug is a 500 answer."""
    try:
        return await anyio.to_thread.run_sync(fn, *args, limiter=request.app.state.limiter)
    except (ApiError, Refused, Unauthorized):
        raise
    except Exception as e:
        log.exception("api request failed", path=request.url.path)
        raise ApiError(500, f"internal error: {type(e).__name__}: {e}") from e


async def raw_body(request: Request) -> bytes:
    header = request.headers.get("content-length") or "0"
    # Digits only: int() would take "-1" or " 12 ".
    if not header.isdigit():
        msg = f"Content-Length must be a number of bytes, got {header!r}"
        raise ApiError(400, msg)
    if int(header) > MAX_BODY:
        raise ApiError(413, f"request body over {MAX_BODY} bytes")
    data = bytearray()
    try:
        with anyio.fail_after(request.app.state.request_timeout):
            async for chunk in request.stream():
                data += chunk
                if len(data) > MAX_BODY:
                    raise ApiError(413, f"request body over {MAX_BODY} bytes")
    except TimeoutError as e:
        msg = "the request body did not arrive in time (nimbus.http.timeout.secs)"
        raise ApiError(408, msg) from e
    except ClientDisconnect as e:
        msg = f"the request body ended after {len(data)} of {header} bytes"
        raise ApiError(400, msg) from e
    return bytes(data)


async def json_body(request: Request) -> Any:
    raw = await raw_body(request)
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as e:  # bad JSON, bad UTF-8, nesting too deep
        msg = f"the request body is not valid JSON: {str(e)[:200]}"
        raise ApiError(400, msg) from e


def target(request: Request) -> str:
    """The request's path and query as sent (for messages)."""
    raw = request.scope.get("raw_path") or request.url.path.encode()
    query = request.scope.get("query_string") or b""
    return (raw + (b"?" + query if query else b"")).decode("latin-1")
