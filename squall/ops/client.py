"""A client of nimbus's HTTP API that finds the leader among ``nimbus.seeds``."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from squall.errors import SquallError


class NimbusUnavailable(SquallError):
    """No nimbus answered, or none is the leader."""


class RequestRefused(SquallError):
    """Nimbus answered with an error; ``status`` is its HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class NimbusClient:
    def __init__(self, seeds: list[str], timeout: float = 120.0) -> None:
        self.urls = [s if s.startswith("http") else f"http://{s}" for s in seeds]
        self.timeout = timeout

    def _call(self, url: str, method: str, path: str, body: Any) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{url}/api/v1/{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as e:
            try:
                payload = json.loads(e.read() or b"null")
            except ValueError:
                payload = {"error": e.reason}
            return e.code, payload

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
            except (urllib.error.URLError, OSError):
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

    def submit(self, name: str, topology: dict[str, Any], conf: dict[str, Any], code_b64: str | None) -> Any:
        return self.request("POST", "topologies", {"name": name, "topology": topology, "conf": conf,
                                                   "code": code_b64})

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
