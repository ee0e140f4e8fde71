"""One ASGI app for nimbus and local mode's ``--ui``: the route table (squall.ui.routes) and
Storm's error shapes (squall.ui.answers), behind the HTTP stack's Guard (squall.httpd.guard:
authentication, the request budget and the audit)."""

from __future__ import annotations

from typing import Any

import anyio
from prometheus_client.registry import CollectorRegistry
from starlette.applications import Starlette
from starlette.types import ASGIApp

from squall.httpd.auth import Gate
from squall.httpd.guard import Guard
from squall.ui.answers import EXCEPTION_HANDLERS
from squall.ui.backend import Backend, SquallApi
from squall.ui.routes import PAGES, SQUALL, STORM


def create_app(backend: Backend, *, registry: CollectorRegistry, gate: Gate | None = None,
               squall: SquallApi | None = None, max_requests: int = 32,
               request_timeout: float = 30.0, max_requests_per_user: int | None = None) -> ASGIApp:
    """The app for ``backend``; ``squall``: Squall's own API too (nimbus), ``registry``: what
    /metrics shows, ``gate``: who may (None: anyone, insecure), ``request_timeout``: how long
    a request's body may take to arrive, ``max_requests_per_user``: how many of the
    ``max_requests`` one user may hold (None: all)."""
    routes = [*STORM, *(SQUALL if squall is not None else []), *PAGES]
    app = Starlette(routes=routes, exception_handlers=dict(EXCEPTION_HANDLERS))  # type: ignore[arg-type]
    app.router.redirect_slashes = False
    state: Any = app.state
    state.backend, state.squall, state.registry, state.gate = backend, squall, registry, gate
    state.request_timeout = request_timeout
    # The cluster's calls run in threads, as many as requests may be served at once.
    state.limiter = anyio.CapacityLimiter(max_requests + 1)
    return Guard(app, gate, max_requests, per_user=max_requests_per_user)
