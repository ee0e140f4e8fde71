"""The topology's side of DRPC (Storm's DistributedRPCInvocations): take a request of a
function from a DRPC server, answer it, or fail it.  :class:`~squall.drpc.DRPCSpout` and
:class:`~squall.drpc.ReturnResults` use it; so can any spout (a Trident DRPC stream):

    invocations = DRPCInvocations.for_task(conf, context, local_drpc)   # in initialize/open
    request = invocations.fetch_request("words", timeout=0.5)           # DRPCRequest or None
    invocations.result(request.return_info, "the answer")               # or:
    invocations.fail_request(request.return_info, "why")
    invocations.close()

``return_info`` is Storm's: JSON text ``{"host", "port", "id"}`` naming the server the
request came from (in local mode ``host`` is the LocalDRPC's service id and ``port`` 0),
so whichever task holds it can answer.  A result goes only to a server this
topology may fetch from (``drpc.servers`` and ``drpc.port``, or a LocalDRPC of this
process): a forged return info cannot send the topology's credential elsewhere.

On a cluster a server is reached over HTTP(S) (squall.drpc_server), the worker
authenticating with its topology's DRPC credential (``secrets.json``, in the worker's
resources: squall.worker.process.contract.DRPC_RESOURCE) and trusting the cluster's CA that
came with it; a fetch waits at the server (long polling) up to its ``timeout``, so a
request reaches a waiting spout within milliseconds.  In local mode a
:class:`~squall.drpc.LocalDRPC` of this process answers directly, found by its service id.
"""

from __future__ import annotations

import json
import threading
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

import httpx

from squall.errors import ConfigError, DRPCExecutionError
from squall.security import tls
from squall.worker.process.contract import DRPC_RESOURCE

LOCAL_ID_PREFIX = "local-drpc-"  # a LocalDRPC's service id: local-drpc-<random>
UNAVAILABLE = "UNAVAILABLE"  # no answer from the server (not one of Storm's types: Storm's TException)
AUTHORIZATION = "AUTHORIZATION"
RETRIES = 3  # an answer or a failure is sent this many times before it is given up (Storm's)
CALL_TIMEOUT_SECS = 30.0
INVOCATIONS = "/invocations"  # the server's routes for topologies (squall.drpc_server.app)


@dataclass(frozen=True)
class DRPCRequest:
    request_id: str
    func_args: str
    return_info: str  # JSON: where the answer goes


def return_info(host: str, port: int, request_id: str) -> str:
    return json.dumps({"host": host, "port": port, "id": request_id}, sort_keys=True)


def parse_return_info(text: Any) -> tuple[str, int, str]:
    """(host, port, request id) of a return info; ValueError naming what is wrong."""
    try:
        info = json.loads(text) if isinstance(text, (str, bytes)) else None
    except ValueError:
        info = None
    if (not isinstance(info, dict) or not isinstance(info.get("host"), str)
            or not isinstance(info.get("port"), int) or not isinstance(info.get("id"), str)):
        msg = f"a DRPC return info is JSON text {{'host', 'port', 'id'}}, got {text!r}"
        raise ValueError(msg)
    return info["host"], info["port"], info["id"]


# -- local mode: LocalDRPC instances of this process, by service id ------------------------------
# In-process by nature (Storm's ServiceRegistry): a local topology's spout finds the LocalDRPC
# its spec names here.  Weak: a LocalDRPC nobody holds is gone from it.
_LOCAL: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
_LOCAL_LOCK = threading.Lock()


def register_local(server: Any, service_id: str) -> None:
    with _LOCAL_LOCK:
        _LOCAL[service_id] = server


def unregister_local(service_id: str) -> None:
    with _LOCAL_LOCK:
        _LOCAL.pop(service_id, None)


def local_server(service_id: str) -> Any:
    with _LOCAL_LOCK:
        return _LOCAL.get(service_id)


def service_id_of(local_drpc: Any) -> str | None:
    """A LocalDRPC's service id (or the id itself, as a spec carries it); None for None."""
    if local_drpc is None or isinstance(local_drpc, str):
        return local_drpc
    service_id = getattr(local_drpc, "service_id", None)
    if not isinstance(service_id, str):
        msg = f"local_drpc must be a squall.drpc.LocalDRPC, got {local_drpc!r}"
        raise TypeError(msg)
    return service_id


# -- endpoints: one DRPC server each ------------------------------------------------------------


class Endpoint(Protocol):
    key: tuple[str, int]

    def fetch_request(self, function: str, timeout: float) -> DRPCRequest | None: ...

    def result(self, request_id: str, result: str) -> None: ...

    def fail_request(self, request_id: str, message: str | None) -> None: ...

    def close(self) -> None: ...


class LocalEndpoint:
    """A LocalDRPC of this process."""

    def __init__(self, service_id: str) -> None:
        self.key = (service_id, 0)

    def _server(self) -> Any:
        server = local_server(self.key[0])
        if server is None:
            msg = f"no LocalDRPC {self.key[0]!r} in this process (shut down, or never made here)"
            raise DRPCExecutionError(msg, UNAVAILABLE)
        return server

    def fetch_request(self, function: str, timeout: float) -> DRPCRequest | None:
        server = local_server(self.key[0])
        if server is None:  # shut down while the topology runs on (Storm's spout then waits too)
            time.sleep(min(timeout, 0.5))
            return None
        found = server.fetch_request(function, timeout)
        if found is None:
            return None
        request_id, args = found
        return DRPCRequest(request_id, args, return_info(self.key[0], 0, request_id))

    def result(self, request_id: str, result: str) -> None:
        self._server().result(request_id, result)

    def fail_request(self, request_id: str, message: str | None) -> None:
        self._server().fail_request(request_id, message)

    def close(self) -> None:
        return None


class HttpEndpoint:
    """A DRPC server over HTTP(S), as a topology's worker reaches it."""

    def __init__(self, host: str, port: int, token: str | None, ca_pem: str | None) -> None:
        self.key = (host, port)
        scheme = "https" if ca_pem is not None else "http"
        self.url = f"{scheme}://{host}:{port}{INVOCATIONS}"
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        verify: Any = tls.client_context(ca_pem=ca_pem) if ca_pem is not None else True
        # Not the environment's proxies: the server is reached directly.
        self.client = httpx.Client(verify=verify, timeout=CALL_TIMEOUT_SECS, trust_env=False)

    def _post(self, path: str, body: str = "", timeout: float = CALL_TIMEOUT_SECS) -> Any:
        try:
            response = self.client.post(self.url + path, content=body.encode(), headers=self.headers,
                                        timeout=timeout)
        except httpx.HTTPError as e:
            msg = f"DRPC server {self.key[0]}:{self.key[1]} did not answer: {type(e).__name__}: {e}"
            raise DRPCExecutionError(msg, UNAVAILABLE) from e
        if response.status_code in (401, 403):
            msg = f"DRPC server {self.key[0]}:{self.key[1]} refused this topology: {_error_of(response)}"
            raise DRPCExecutionError(msg, AUTHORIZATION, response.status_code)
        if response.is_error:
            status = response.status_code
            msg = f"DRPC server {self.key[0]}:{self.key[1]} answered {status}: {_error_of(response)}"
            raise DRPCExecutionError(msg, UNAVAILABLE, status)
        return response.json()

    def fetch_request(self, function: str, timeout: float) -> DRPCRequest | None:
        wait = max(0.0, timeout)
        found = self._post(f"/fetchRequest/{quote(function, safe='')}?wait={wait:g}",
                           timeout=wait + CALL_TIMEOUT_SECS)
        request_id = found.get("request_id") if isinstance(found, dict) else None
        if not request_id:
            return None
        return DRPCRequest(request_id, str(found.get("func_args", "")),
                           return_info(self.key[0], self.key[1], request_id))

    def result(self, request_id: str, result: str) -> None:
        self._post(f"/result/{quote(request_id, safe='')}", result)

    def fail_request(self, request_id: str, message: str | None) -> None:
        self._post(f"/failRequest/{quote(request_id, safe='')}", message or "")

    def close(self) -> None:
        self.client.close()


def _error_of(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase
    if isinstance(body, dict):
        return str(body.get("errorMessage") or body.get("error") or body)
    return str(body)[:300]


# -- what a component holds ---------------------------------------------------------------------


class DRPCInvocations:
    """The DRPC servers one task fetches from (``fetch_from``), and every one it may answer."""

    def __init__(self, servers: list[tuple[str, int]], fetch_from: list[tuple[str, int]],
                 credential: Mapping[str, Any] | None, local: str | None = None) -> None:
        self.allowed = set(servers)
        self.credential = credential
        self.local = local
        self._endpoints: dict[tuple[str, int], Endpoint] = {}
        self._lock = threading.Lock()
        self.fetch_from = [(local, 0)] if local is not None else list(fetch_from)
        self._turn = 0

    @classmethod
    def for_task(cls, conf: Mapping[str, Any], context: Any = None,
                 local_drpc: Any = None) -> DRPCInvocations:
        """What the task of ``context`` fetches from: ``local_drpc`` (a LocalDRPC or its id)
        if given, else ``drpc.servers`` -- all of them when the component has fewer tasks
        than there are servers, else one, by task index (Storm's DRPCSpout)."""
        local = service_id_of(local_drpc)
        if local is not None:
            return cls([], [], None, local)
        servers = configured_servers(conf)
        fetch_from = servers
        if context is not None and len(context.this_component_tasks) >= len(servers):
            fetch_from = [servers[context.this_task_index % len(servers)]]
        return cls(servers, fetch_from, worker_credential(conf, context))

    @classmethod
    def for_results(cls, conf: Mapping[str, Any], context: Any = None) -> DRPCInvocations:
        """What answers requests (ReturnResults): whichever server or LocalDRPC a request's
        return info names.  ``drpc.servers`` unset is no error here: a local topology's
        answers go to its LocalDRPC."""
        servers = configured_servers(conf, required=False)
        credential = worker_credential(conf, context) if servers else None
        return cls(servers, [], credential)

    # -- the API ------------------------------------------------------------------------------------

    def endpoints(self) -> list[Endpoint]:
        """One per server this task fetches from (a spout may poll each from a thread)."""
        return [self._endpoint(key) for key in self.fetch_from]

    def fetch_request(self, function: str, timeout: float = 0.0) -> DRPCRequest | None:
        """The next request of ``function``, waiting at most ``timeout`` seconds for one;
        None when none came.  Several servers are asked in turn.  DRPCExecutionError when
        a server cannot be reached or refuses this topology."""
        endpoints = self.endpoints()
        if not endpoints:
            return None
        start = self._turn % len(endpoints)
        self._turn += 1
        order = endpoints[start:] + endpoints[:start]
        for endpoint in order[1:] if len(order) > 1 else ():
            request = endpoint.fetch_request(function, 0.0)
            if request is not None:
                return request
        return order[0].fetch_request(function, timeout)

    def result(self, return_info_text: str, result: str) -> None:
        """Answer the request ``return_info_text`` names (retried; DRPCExecutionError when
        it could not be delivered)."""
        host, port, request_id = parse_return_info(return_info_text)
        endpoint = self._endpoint((host, port))
        _retried(lambda: endpoint.result(request_id, result))

    def fail_request(self, return_info_text: str, message: str | None = None) -> None:
        """Fail the request ``return_info_text`` names: its client gets DRPCExecutionError."""
        host, port, request_id = parse_return_info(return_info_text)
        endpoint = self._endpoint((host, port))
        _retried(lambda: endpoint.fail_request(request_id, message))

    def close(self) -> None:
        with self._lock:
            endpoints, self._endpoints = list(self._endpoints.values()), {}
        for endpoint in endpoints:
            endpoint.close()

    def _endpoint(self, key: tuple[str, int]) -> Endpoint:
        with self._lock:
            endpoint = self._endpoints.get(key)
            if endpoint is not None:
                return endpoint
            if key[1] == 0 and key[0].startswith(LOCAL_ID_PREFIX):
                endpoint = LocalEndpoint(key[0])
            elif key in self.allowed:
                credential = self.credential or {}
                endpoint = HttpEndpoint(key[0], key[1], credential.get("token"), credential.get("ca"))
            else:
                msg = (f"DRPC server {key[0]}:{key[1]} is not one this topology may answer "
                       f"(drpc.servers and drpc.port name {sorted(self.allowed) or 'none'})")
                raise DRPCExecutionError(msg, UNAVAILABLE)
            self._endpoints[key] = endpoint
            return endpoint


def configured_servers(conf: Mapping[str, Any], required: bool = True) -> list[tuple[str, int]]:
    servers = conf.get("drpc.servers") or []
    if not servers and required:
        msg = ("no DRPC servers configured (drpc.servers): set them in squall.yaml or the topology's "
               "conf, or in local mode give the spout a LocalDRPC (create_local_topology(drpc))")
        raise ConfigError(msg)
    port = int(conf.get("drpc.port") or 3772)
    out = []
    for server in servers:
        host, sep, given = str(server).rpartition(":")
        out.append((host, int(given)) if sep and given.isdigit() and host else (str(server), port))
    return out


def worker_credential(conf: Mapping[str, Any], context: Any) -> Mapping[str, Any] | None:
    """The topology's DRPC credential ({"token", "ca"}) in a secure cluster, None when not
    secure; ConfigError when secure and this worker holds none."""
    if not conf.get("squall.secure", True):
        return None
    resources = getattr(context, "resources", None) or {}
    credential = resources.get(DRPC_RESOURCE)
    if not isinstance(credential, Mapping) or not credential.get("token"):
        msg = ("the cluster is secure (squall.secure) but this worker holds no DRPC credential: "
               "a topology gets one when a nimbus that issues them accepts it (resubmit it); in local "
               "mode, give the spout a LocalDRPC")
        raise ConfigError(msg)
    return credential


def _retried(call: Any) -> None:
    for attempt in range(1, RETRIES + 1):
        try:
            call()
            return
        except DRPCExecutionError as e:
            if e.type != UNAVAILABLE or attempt == RETRIES:
                raise
            time.sleep(0.1 * attempt)
