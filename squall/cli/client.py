"""A client of nimbus's HTTP API that finds the leader among ``nimbus.seeds``.

In secure mode (``squall.secure``, the default) it speaks HTTPS, trusting the
keyring's CA (or ``nimbus.tls.ca.path``), and sends the keyring's token: the
CLI authenticates with nothing typed."""

from __future__ import annotations

import json
import ssl
from typing import Any

import httpx

from squall.errors import SquallError
from squall.security.keyring import client_credentials


class NimbusUnavailable(SquallError):
    """No nimbus answered, or none is the leader."""


class RequestRefused(SquallError):
    """Nimbus answered with an error; ``status`` is its HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class NimbusClient:
    def __init__(self, seeds: list[str], timeout: float = 120.0, *, token: str | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        scheme = "https" if ssl_context is not None else "http"
        self.urls = [s if s.startswith("http") else f"{scheme}://{s}" for s in seeds]
        self.timeout = timeout
        self.token = token
        self.ssl_context = ssl_context

    @classmethod
    def for_conf(cls, conf: dict[str, Any], timeout: float = 120.0) -> NimbusClient:
        token, context = credentials(conf)
        return cls(conf["nimbus.seeds"], timeout, token=token, ssl_context=context)

    def headers(self) -> dict[str, str]:
        out = {"Content-Type": "application/json"}
        if self.token:
            out["Authorization"] = f"Bearer {self.token}"
        return out

    def _call(self, url: str, method: str, path: str, body: Any) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        with http_client(self.ssl_context, self.timeout) as client:
            response = client.request(method, f"{url}/api/v1/{path}", content=data, headers=self.headers())
        if response.is_success:
            return response.status_code, json.loads(response.content or b"null")
        try:
            payload = json.loads(response.content or b"null")
        except ValueError:
            payload = {"error": response.reason_phrase}
        return response.status_code, payload

    def request(self, method: str, path: str, body: Any = None) -> Any:
        tried: list[str] = []
        queue = list(self.urls)
        while queue:
            url = queue.pop(0)
            if url in tried:
                continue
            tried.append(url)
            try:
                status, payload = self._call(url, method, path, body)
            except (httpx.TransportError, OSError):
                continue
            if status == 503:  # not the leader: it tells us who is
                leader = (payload or {}).get("leader")
                if leader and leader not in tried:
                    queue.insert(0, leader)
                continue
            if status >= 400:
                message = (payload or {}).get("error") if isinstance(payload, dict) else str(payload)
                raise RequestRefused(status, message or f"HTTP {status}")
            return payload
        msg = f"no leading nimbus answered (tried {', '.join(tried) or 'nothing'})"
        raise NimbusUnavailable(msg)

    def metrics_text(self) -> str:
        """``GET /metrics``: the Prometheus exposition, from the first nimbus that answers
        (standbys serve it too)."""
        failures = []
        for url in self.urls:
            try:
                with http_client(self.ssl_context, self.timeout) as client:
                    response = client.get(f"{url}/metrics", headers=self.headers())
            except (httpx.TransportError, OSError) as e:
                failures.append(f"{url}: {e}")
                continue
            if response.is_success:
                return response.text
            raise RequestRefused(response.status_code, f"GET {url}/metrics: HTTP {response.status_code}")
        msg = f"no nimbus answered /metrics ({'; '.join(failures) or 'none configured'})"
        raise NimbusUnavailable(msg)

    def submit(self, name: str, topology: dict[str, Any], conf: dict[str, Any], code_b64: str | None,
               requirements: dict[str, Any] | None = None) -> Any:
        body = {"name": name, "topology": topology, "conf": conf, "code": code_b64}
        if requirements is not None:
            body["requirements"] = requirements  # squall.runtime.envs.Requirements.to_record
        return self.request("POST", "topologies", body)

    def kill(self, name: str, wait_secs: float | None = None) -> Any:
        return self.request("POST", f"topologies/{name}/kill", {"wait_secs": wait_secs})

    def action(self, name: str, action: str, body: dict[str, Any] | None = None) -> Any:
        return self.request("POST", f"topologies/{name}/{action}", body or {})

    def list(self) -> Any:
        return self.request("GET", "topologies")

    def info(self, name: str) -> Any:
        return self.request("GET", f"topologies/{name}")

    def cluster(self) -> Any:
        return self.request("GET", "cluster")

    def logviewer_token(self, logviewer: str) -> Any:
        """``{"token", "expires_in_secs", ...}``: a token for reading the logviewer at
        ``logviewer`` (its base URL) as this client's user, which nimbus minted."""
        return self.request("POST", "logviewer/token", {"logviewer": logviewer})


def http_client(ssl_context: ssl.SSLContext | None = None, timeout: float = 30.0) -> httpx.Client:
    """An HTTP client that trusts ``ssl_context``'s CAs (the keyring's: see :func:`credentials`),
    not the system's; no proxies from the environment (nimbus is reached directly)."""
    return httpx.Client(verify=ssl_context if ssl_context is not None else True, timeout=timeout,
                        trust_env=False)


def credentials(conf: dict[str, Any]) -> tuple[str | None, ssl.SSLContext | None]:
    """(token, TLS context) for talking to nimbus under ``conf``; (None, None) when insecure."""
    return client_credentials(conf)
