"""The app's refusals in Storm's error shape (``{"error": message}``): the services' own
(squall.errors.Refused) given their status by squall.httpd.answers.REFUSED_STATUS, the
one table of them, which every daemon's HTTP edge reads; the HTTP edge's own (ApiError,
the router's 404 and 405, an unauthenticated request); a 503 names the leader, who can
serve the request instead."""

from __future__ import annotations

import anyio
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from squall.errors import ApiError, Refused
from squall.httpd.answers import refusal, status_of, target
from squall.httpd.auth import Unauthorized


async def on_api_error(request: Request, exc: Exception) -> Response:
    """An ApiError (the edge's own status) or a Refused (its kind's status)."""
    assert isinstance(exc, (ApiError, Refused))
    status = status_of(exc)
    if status == 503:  # who can serve it instead
        leader = await anyio.to_thread.run_sync(request.app.state.backend.leadership.leader_url)
        return refusal(503, str(exc), leader=leader)
    return refusal(status, str(exc))


async def on_unauthorized(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Unauthorized)
    headers = {"WWW-Authenticate": 'Bearer realm="squall"'} if exc.status == 401 else {}
    return refusal(exc.status, str(exc), headers=headers)


async def on_http_exception(request: Request, exc: Exception) -> Response:
    """The router's own refusals: no such path (404), or not with this method (405)."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        return refusal(405, f"{request.method} {target(request)} is not supported")
    if exc.status_code == 404:
        return refusal(404, f"no such endpoint {target(request)!r}")
    return refusal(exc.status_code, str(exc.detail))


EXCEPTION_HANDLERS = {ApiError: on_api_error, Refused: on_api_error, Unauthorized: on_unauthorized,
                      HTTPException: on_http_exception}
