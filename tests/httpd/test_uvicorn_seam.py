"""The one place Squall leans on uvicorn's private parts (squall.httpd.connections): Door is
the HTTP protocol uvicorn's server makes for each connection, and GuardedH11 subclasses
uvicorn's H11Protocol.  Nothing public gives what they add (a deadline from the accept and
for each request's headers, the oldest idle stranger turned away per address and in all,
the TLS handshake's own deadline, the connection in the ASGI scope, refusals in Storm's
shape), so pyproject.toml pins uvicorn to the releases they were tested on, and this checks
what they rely on by name: a release that changes it fails here, saying what changed,
rather than as a server that drops every connection."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle
from uvicorn.server import Server, ServerState

from squall.httpd.connections import Door, GuardedH11

# uvicorn.server.Server makes ``config.http_protocol_class(config=, server_state=,
# app_state=, _loop=)``; H11Protocol takes the same, in this order.
PROTOCOL_ARGS = ["self", "config", "server_state", "app_state", "_loop"]
# What GuardedH11 overrides, each calling uvicorn's through super().
OVERRIDDEN = ("connection_made", "data_received", "connection_lost", "handle_events",
              "on_response_complete", "send_400_response")


async def app(scope: Any, receive: Any, send: Any) -> None:
    pass


def test_uvicorn_makes_its_protocol_with_the_arguments_door_and_guarded_h11_take() -> None:
    assert list(inspect.signature(H11Protocol.__init__).parameters) == PROTOCOL_ARGS, (
        "uvicorn's H11Protocol takes other arguments than squall.httpd.connections was written "
        "for: check Door and GuardedH11 against this release, then the pin in pyproject.toml")
    assert list(inspect.signature(Door.__init__).parameters)[:5] == PROTOCOL_ARGS
    assert list(inspect.signature(GuardedH11.__init__).parameters)[:5] == PROTOCOL_ARGS
    made_with = inspect.getsource(Server.startup)
    for keyword in PROTOCOL_ARGS[1:]:
        assert f"{keyword}=" in made_with, f"uvicorn's server no longer passes {keyword!r} to the protocol"


def test_the_methods_guarded_h11_overrides_are_h11protocols_with_the_same_arguments() -> None:
    for name in OVERRIDDEN:
        theirs = getattr(H11Protocol, name, None)
        assert callable(theirs), f"uvicorn's H11Protocol has no {name}() for GuardedH11 to override"
        ours = getattr(GuardedH11, name)
        assert list(inspect.signature(ours).parameters) == list(inspect.signature(theirs).parameters), name


def test_the_state_guarded_h11_reads_is_where_it_was() -> None:
    loop = asyncio.new_event_loop()
    try:
        protocol = H11Protocol(config=Config(app=app), server_state=ServerState(), app_state={}, _loop=loop)
    finally:
        loop.close()
    for attribute in ("conn", "cycle", "transport", "loop"):
        assert hasattr(protocol, attribute), f"uvicorn's H11Protocol no longer keeps self.{attribute}"
    cycle_fields = inspect.signature(RequestResponseCycle.__init__).parameters
    assert "scope" in cycle_fields, "uvicorn's request cycle no longer takes its ASGI scope"
    source = inspect.getsource(RequestResponseCycle)
    for attribute in ("keep_alive", "response_complete"):
        assert f"self.{attribute}" in source, f"uvicorn's request cycle no longer keeps self.{attribute}"
