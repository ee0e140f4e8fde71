"""Nimbus's HTTP API under load: ``GET /api/v1/topology/<id>`` from many clients at once.

    python benchmarks/api_latency.py [--clients 100] [--duration 10] [--insecure] [--max-connections 128]

Starts a real dev cluster (ZooKeeper JVM, nimbus, one supervisor; secure by default: TLS and
a token on every request) running the word count, then ``--clients`` concurrent clients (one
process, asyncio and httpx, each with a connection of its own) ask for the topology's page
for ``--duration`` seconds, twice: reusing their connection (keep-alive, where the server
allows it) and with a new connection (a TLS handshake) per request.  Latency is per request,
from sending to the whole answer; an answer other than 200 (a 503 when nimbus is busy) or
no answer counts as an error and not in the latency.  ``nimbus.http.max.connections`` is
raised to ``--max-connections`` (default 128, the default 32 would answer most of 100 clients
503 at once) so that every client is served.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import quantiles
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from squall.cli.client import credentials  # noqa: E402
from squall.cli.devcluster import DevCluster  # noqa: E402

WORDCOUNT = REPO / "examples" / "wordcount.py"


async def load(url: str, headers: dict[str, str], verify: Any, clients: int, duration: float,
               keep_alive: bool) -> dict[str, Any]:
    latencies: list[float] = []
    errors: dict[str, int] = {}
    stop = time.monotonic() + duration

    def new_client() -> httpx.AsyncClient:
        return httpx.AsyncClient(verify=verify, timeout=60, trust_env=False,
                                 limits=httpx.Limits(max_connections=1, max_keepalive_connections=1))

    async def one_client() -> None:
        client = new_client()
        try:
            while time.monotonic() < stop:
                if not keep_alive:
                    await client.aclose()
                    client = new_client()
                started = time.perf_counter()
                try:
                    response = await client.get(url, headers=headers)
                except httpx.HTTPError as e:
                    errors[type(e).__name__] = errors.get(type(e).__name__, 0) + 1
                    continue
                if response.status_code == 200:
                    latencies.append(time.perf_counter() - started)
                else:
                    errors[str(response.status_code)] = errors.get(str(response.status_code), 0) + 1
        finally:
            await client.aclose()

    started = time.monotonic()
    await asyncio.gather(*(one_client() for _ in range(clients)))
    elapsed = time.monotonic() - started
    cuts = quantiles(latencies, n=100) if len(latencies) >= 2 else [float("nan")] * 99
    return {"ok": len(latencies), "errors": errors, "p50": cuts[49] * 1000, "p99": cuts[98] * 1000,
            "rate": len(latencies) / elapsed}


def table(rows: list[tuple[str, dict[str, Any]]], clients: int) -> str:
    lines = [f"GET /api/v1/topology/<id>, {clients} concurrent clients",
             "",
             "| connections | answered 200 | errors | p50 (ms) | p99 (ms) | req/s (200s) |",
             "|---|---|---|---|---|---|"]
    for mode, r in rows:
        errors = ", ".join(f"{n}x {k}" for k, n in sorted(r["errors"].items())) or "0"
        lines.append(f"| {mode} | {r['ok']} | {errors} | {r['p50']:.1f} | {r['p99']:.1f} | {r['rate']:.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--insecure", action="store_true")
    parser.add_argument("--max-connections", type=int, default=128)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="squall-api-bench-") as tmp:
        cluster = DevCluster(Path(tmp) / "c", supervisors=1, slots=2, secure=not args.insecure,
                             conf={"nimbus.http.max.connections": args.max_connections})
        try:
            cluster.start()
            submit = [sys.executable, "-m", "squall.cli", "submit", "--config", str(cluster.config_file)]
            subprocess.run([*submit, str(WORDCOUNT)], check=True, capture_output=True, cwd=REPO)
            (topology,) = cluster.api("GET", "topologies")
            token, context = credentials(cluster.conf)
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            url = f"{cluster.nimbus_url}/api/v1/topology/{topology['id']}?window=600"
            rows = []
            for mode, keep_alive in (("kept alive", True), ("new per request", False)):
                verify = context if context is not None else True
                result = asyncio.run(load(url, headers, verify, args.clients, args.duration, keep_alive))
                rows.append((mode, result))
        finally:
            cluster.stop()
    print(table(rows, args.clients))


if __name__ == "__main__":
    main()
