"""DRPCClient: call a DRPC function on a cluster (Storm's DRPCClient).

    with DRPCClient(conf) as client:             # conf None: squall.yaml, as the CLI finds it
        print(client.execute("reach", "http://twitter.com"))

It speaks the DRPC server's HTTP form (``POST /drpc/<function>``, the arguments as the
body) to one of ``drpc.servers`` on ``drpc.port`` -- another when one does not answer
the connection, never twice the same request -- over TLS trusting the keyring's CA, with
the keyring's token, as the CLI does with nimbus.  A request the topology fails, one
that times out at the server (``drpc.request.timeout.secs``), or a refusal raises
DRPCExecutionError with the server's reason and Storm's type.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from squall import config as config_mod
from squall.drpc.invocations import AUTHORIZATION, UNAVAILABLE, configured_servers
from squall.drpc.requests import INTERNAL_ERROR, SERVER_TIMEOUT, check_call
from squall.errors import DRPCExecutionError
from squall.security.keyring import client_credentials

MARGIN_SECS = 30.0  # past the server's own timeout, before the client stops waiting


class DRPCClient:
    def __init__(self, conf: Mapping[str, Any] | None = None, host: str | None = None,
                 port: int | None = None, timeout: float | None = None) -> None:
        """``conf``: the cluster's settings (None: squall.yaml as the CLI finds it);
        ``host``/``port``: this server (else ``drpc.servers`` and ``drpc.port``);
        ``timeout``: how long to wait for an answer (else the server's timeout and a margin)."""
        if conf is None:
            from squall.runtime.settings import load_conf

            conf = load_conf(client=True)
        conf = config_mod.merge(dict(conf))
        if host is not None:
            self.servers = [(host, int(port if port is not None else conf["drpc.port"]))]
        else:
            self.servers = configured_servers(conf)
        token, context = client_credentials(conf)
        self.scheme = "https" if context is not None else "http"
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        server_timeout = float(conf["drpc.request.timeout.secs"])
        self.timeout = timeout if timeout is not None else server_timeout + MARGIN_SECS
        connect = min(10.0, self.timeout)
        self.client = httpx.Client(verify=context if context is not None else True, trust_env=False,
                                   timeout=httpx.Timeout(self.timeout, connect=connect))

    def __enter__(self) -> DRPCClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.client.close()

    def execute(self, function: str, args: str) -> str:
        """The result text of ``function(args)``; DRPCExecutionError when there is none."""
        check_call(function, args)
        start = random.randrange(len(self.servers))
        order = self.servers[start:] + self.servers[:start]
        unreachable = []
        for host, port in order:
            url = f"{self.scheme}://{host}:{port}/drpc/{quote(function, safe='')}"
            try:
                response = self.client.post(url, content=args.encode(), headers=self.headers)
            except (httpx.ConnectError, httpx.ConnectTimeout) as e:
                unreachable.append(f"{host}:{port} ({type(e).__name__}: {e})")
                continue  # the request never reached it: another server may take it
            except httpx.TimeoutException as e:
                msg = (f"no answer from DRPC server {host}:{port} within {self.timeout:g} s for "
                       f"{function!r}: is a running topology serving {function!r}? (function names are "
                       f"case-sensitive)")
                raise DRPCExecutionError(msg, SERVER_TIMEOUT) from e
            except httpx.HTTPError as e:
                msg = f"DRPC server {host}:{port} broke off the call of {function!r}: {type(e).__name__}: {e}"
                raise DRPCExecutionError(msg, UNAVAILABLE) from e
            if response.is_success:
                return response.text
            raise refused(response, f"{host}:{port}")
        msg = f"no DRPC server answered: {'; '.join(unreachable)}"
        raise DRPCExecutionError(msg, UNAVAILABLE)


def refused(response: httpx.Response, server: str) -> DRPCExecutionError:
    """The server's error answer as DRPCExecutionError: Storm's ``{"error": type,
    "errorMessage": reason}``, or Squall's refusals' ``{"error": reason}``."""
    try:
        body = response.json()
    except ValueError:
        body = None
    status = response.status_code
    if isinstance(body, dict) and "errorMessage" in body:
        return DRPCExecutionError(str(body["errorMessage"]), str(body.get("error") or INTERNAL_ERROR), status)
    reason = str(body.get("error")) if isinstance(body, dict) and body.get("error") else \
        (response.text[:300] or response.reason_phrase)
    kind = AUTHORIZATION if status in (401, 403) else INTERNAL_ERROR
    return DRPCExecutionError(f"DRPC server {server} refused the request ({status}): {reason}", kind, status)
