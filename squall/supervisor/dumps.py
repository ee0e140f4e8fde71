"""The logviewer's worker profiling outputs (Storm's ``/api/v1/dumps``): the stack dumps,
profiles and restart notes the supervisor's profiler (squall.supervisor.profiler) wrote
beside a worker's log, listed and served to those who may read that worker's logs::

    GET /api/v1/dumps/:topology-id/:host-port          the worker's outputs, newest first (JSON)
    GET /api/v1/dumps/:topology-id/:host-port/:file    one of them (text, SVG or JSON)

``:host-port`` is the worker as nimbus's answer names it (``host:port``): the port picks
its directory.  Names are only ever those the profiler gives (squall.runtime.profiling):
nothing else in the directory, no path.  A flame graph is an SVG with scripts (its zoom):
served under a sandboxing Content-Security-Policy, so that they run in an origin of their
own, never the logviewer's.  A browser opening a listing link with no token gets the dumps
page (squall/ui/static/dumps.html), which reads it with the token in the address's
fragment, as the log page does.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from squall.errors import ApiError
from squall.httpd.answers import JsonAnswer, call
from squall.runtime import profiling
from squall.supervisor import logfiles
from squall.supervisor.workers import open_plain_file

MEDIA = {"txt": "text/plain; charset=utf-8", "error.txt": "text/plain; charset=utf-8",
         "svg": "image/svg+xml", "json": "application/json"}
MAX_BYTES = 64 * 1024 * 1024  # one output's most (a long speedscope profile is a few MB)


def worker_dir(logs: Any, user: str | None, topology_id: str, worker: str) -> tuple[Path, int]:
    """The worker's artifacts directory and port, if ``user`` may read its logs."""
    try:
        _host, port = profiling.host_port(worker)
        wanted = logfiles.worker_file(f"{topology_id}/{port}/{logfiles.WORKER_LOG}")
    except (ValueError, logfiles.BadLogRequest) as e:
        raise ApiError(400, f"not a worker's outputs: {e}") from None
    logs.authorize(user, logs.readers(wanted.topology_id, port))
    return logfiles.worker_dir(logs.local_dir, wanted.topology_id, port), port


def listing(directory: Path, base: str) -> list[dict[str, Any]]:
    """The outputs in ``directory``, newest first, each with its link (``base``/name)."""
    try:
        entries = list(directory.iterdir())
    except OSError:
        return []
    found = []
    for entry in entries:
        output = profiling.output_file(entry.name)
        if output is None:
            continue
        try:
            st = entry.lstat()
        except OSError:
            continue
        found.append((output, st.st_size, st.st_mtime))
    found.sort(reverse=True)
    return [{"name": o.name, "kind": o.kind, "request": o.request_id, "part": o.part, "failed": o.failed,
             "bytes": size, "time": round(mtime, 3), "link": f"{base}/{quote(o.name, safe='')}"}
            for o, size, mtime in found]


def _params(request: Request) -> dict[str, str]:
    """The path's parameters, each segment decoded on its own (the path is matched as sent:
    an encoded ':' or '/' stays inside its segment)."""
    return {k: unquote(v) for k, v in request.path_params.items()}


async def dumps(request: Request) -> Response:
    logs, user, params = request.app.state.logs, getattr(request.state, "user", None), _params(request)

    def answer() -> dict[str, Any]:
        directory, port = worker_dir(logs, user, params["topology"], params["worker"])
        base = f"/api/v1/dumps/{quote(params['topology'], safe='')}/{quote(params['worker'], safe='')}"
        return {"topologyId": params["topology"], "worker": params["worker"], "port": port,
                "files": listing(directory, base)}

    return JsonAnswer(await call(request, answer))


async def dump_file(request: Request) -> Response:
    logs, user, params = request.app.state.logs, getattr(request.state, "user", None), _params(request)
    output = profiling.output_file(params["file"])
    if output is None:
        raise ApiError(400, f"not a profiling output's name: {params['file'][:200]!r}")

    def read() -> bytes:
        directory, _port = worker_dir(logs, user, params["topology"], params["worker"])
        fd = open_plain_file(directory / output.name)
        if fd is None:
            raise ApiError(404, f"no such output on this node: {output.name}")
        with os.fdopen(fd, "rb") as f:
            return f.read(MAX_BYTES)

    data = await call(request, read)
    headers = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
               # A flame graph's scripts (and anything else here) run in an origin of their own.
               "Content-Security-Policy": "sandbox allow-scripts",
               "Content-Disposition": f'inline; filename="{output.name}"'}
    return Response(data, media_type=MEDIA[output.ext], headers=headers)


ROUTES = [
    Route("/api/v1/dumps/{topology}/{worker}", dumps, methods=["GET"]),
    Route("/api/v1/dumps/{topology}/{worker}/{file}", dump_file, methods=["GET"]),
]
