"""The HTTP server's connections (squall.httpd.server, squall.httpd.connections)."""

from __future__ import annotations

import socket

import httpx
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from squall.httpd.server import HttpServer


async def hello(request: object) -> PlainTextResponse:
    return PlainTextResponse("hello")


def test_every_connection_has_tcp_nodelay_so_a_kept_alive_request_waits_for_no_delayed_ack() -> None:
    # Given a server on a socket of socket.create_server's (proto 0: asyncio leaves Nagle on)
    server = HttpServer(Starlette(routes=[Route("/", hello, methods=["GET", "POST"])]), "127.0.0.1", 0)
    server.start()
    try:
        with httpx.Client(trust_env=False) as client:
            # When a client sends requests on one kept-alive connection
            for _ in range(3):
                assert client.post(f"http://127.0.0.1:{server.port}/", content=b"x").text == "hello"
            # Then its connection on the server's side sends at once (TCP_NODELAY): else each
            # answer's body waited 40 ms for the client's delayed ACK of its headers.
            doors = list(server.doorman.doors)
            assert doors
            for door in doors:
                sock = door.raw.get_extra_info("socket")
                assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        server.stop()
