"""``squall profile TOPOLOGY -c COMPONENT (--dump | --seconds N) [-o DIR]``: every thread's stack,
or a sampled profile, of the workers running a component, taken by py-spy on their nodes
(Storm's UI's JStack and Profile buttons; docs/profiling.md)::

    squall profile wordcount -c count --dump             # each worker's threads, printed
    squall profile wordcount -c count --seconds 30       # a flame graph per worker, saved here
    squall profile wordcount -c count --seconds 30 --format speedscope -o /tmp/profiles

It asks nimbus (``/api/v1/topology/:id/profiling/...``) once per worker, then waits for the
outcome on the worker's logviewer (``/api/v1/dumps/...``, read with a token nimbus mints for
it, as ``squall logs`` does), and prints the dump or the path of the file it saved.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from squall.cli.client import NimbusClient
from squall.cli.logs import LogReader, logviewer_get
from squall.errors import SquallError
from squall.runtime import profiling

WAIT_SECS = 60.0  # past a record's length: how long its supervisor may take to act and write
POLL_SECS = 0.5


@dataclass(frozen=True)
class Worker:
    name: str  # host:port, as nimbus names it


def workers_of(page: dict[str, Any], component: str) -> list[Worker]:
    """The workers of the topology page that run ``component``; SquallError saying why none."""
    components = [*(s.get("spoutId") for s in page.get("spouts") or []),
                  *(b.get("boltId") for b in page.get("bolts") or [])]
    if component not in components:
        known = ", ".join(sorted(c for c in components if c)) or "none"
        msg = f"topology {page.get('name', '?')!r} has no component {component!r} (its components: {known})"
        raise SquallError(msg)
    out = []
    for w in page.get("workers") or []:
        if component in (w.get("componentNumTasks") or {}):
            out.append(Worker(f"{w.get('host')}:{w.get('port')}"))
    if not out:
        msg = f"no worker runs component {component!r} of topology {page.get('name', '?')!r} now"
        raise SquallError(msg)
    return out


def executor_threads(dump: str, component: str) -> list[str]:
    """The names of ``component``'s executor threads in a py-spy dump."""
    mark = f'"executor-{component}-'
    return sorted({line.split('"')[1] for line in dump.splitlines()
                   if line.startswith("Thread ") and mark in line})


class Outputs:
    """What the workers' supervisors wrote, read from their logviewers as this user."""

    def __init__(self, reader: LogReader, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.reader = reader
        self.clock = clock
        self.sleep = sleep

    def _get(self, url: str, worker: str) -> httpx.Response:
        return logviewer_get(self.reader, url, url, worker, "outputs", accept="application/json")

    def wait(self, dumplink: str, request_id: str, worker: str, secs: float) -> tuple[dict[str, Any], bytes]:
        """The first output of request ``request_id`` (its entry and its bytes), once written;
        SquallError when it failed (its reason) or did not come within ``secs``."""
        deadline = self.clock() + secs
        while True:
            files = self._get(dumplink, worker).json().get("files") or []
            mine = [f for f in files if f.get("request") == request_id and not f.get("part")]
            if mine:
                entry = mine[0]
                base = dumplink.split("/api/v1/", 1)[0]
                data = self._get(base + entry["link"], worker).content
                if entry.get("failed"):
                    msg = f"worker {worker}: {data.decode(errors='replace').strip()}"
                    raise SquallError(msg)
                return entry, data
            if self.clock() > deadline:
                msg = (f"worker {worker}: nothing written for request {request_id} in {secs:.0f} s (is its "
                       "supervisor running? its log says)")
                raise SquallError(msg)
            self.sleep(POLL_SECS)


def ask(client: NimbusClient, topology_id: str, worker: str, action: str, query: str = "",
        timeout: str | None = None) -> dict[str, Any]:
    path = f"topology/{quote(topology_id, safe='')}/profiling/{action}/{quote(worker, safe='')}"
    if timeout is not None:
        path += f"/{quote(timeout, safe='')}"
    answer = client.request("POST", path + query)
    if not answer.get("dumplink"):
        msg = (f"the node of worker {worker} serves no logs (its supervisor runs no logviewer: "
               "logviewer.port), so its outputs cannot be read from here")
        raise SquallError(msg)
    return dict(answer)


def run(client: NimbusClient, outputs: Outputs, page: dict[str, Any], args: argparse.Namespace,
        out: Any = sys.stdout) -> int:
    workers = workers_of(page, args.component)
    topology_id = page["id"]
    if args.dump:
        query = "?locals=1" if args.locals else ""
        asked = [(w, ask(client, topology_id, w.name, "dumpjstack", query)) for w in workers]
        for worker, answer in asked:
            _entry, data = outputs.wait(answer["dumplink"], answer["request"], worker.name, WAIT_SECS)
            text = data.decode(errors="replace")
            threads = executor_threads(text, args.component)
            out.write(f"=== worker {worker.name}: executor threads of {args.component}: "
                      f"{', '.join(threads) or 'none found'}\n{text}\n")
        out.flush()
        return 0
    directory = Path(args.output)
    directory.mkdir(parents=True, exist_ok=True)
    query = f"?format={args.format}"
    asked = [(w, ask(client, topology_id, w.name, "start", query, f"{args.seconds:g}s")) for w in workers]
    print(f"recording {len(asked)} worker(s) of {args.component} for {args.seconds:g} s ...", file=sys.stderr)
    for worker, answer in asked:
        secs = args.seconds + WAIT_SECS
        entry, data = outputs.wait(answer["dumplink"], answer["request"], worker.name, secs)
        path = directory / f"{page.get('name', topology_id)}-{worker.name.replace(':', '-')}-{entry['name']}"
        path.write_bytes(data)
        out.write(f"worker {worker.name}: {path}\n")
    out.flush()
    return 0


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value >= profiling.MIN_RECORD_SECS:
        msg = f"--seconds takes a number of seconds >= {profiling.MIN_RECORD_SECS:g}, not {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", metavar="TOPOLOGY", help="the topology's name or id")
    p.add_argument("-c", "--component", required=True, help="the workers running this component")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--dump", action="store_true", help="print every thread's stack (py-spy dump)")
    what.add_argument("--seconds", type=_seconds, metavar="N",
                      help="record a sampled profile for N seconds (py-spy record) and save it")
    p.add_argument("--locals", action="store_true", help="with --dump: each frame's local variables too")
    p.add_argument("--format", choices=sorted(profiling.FORMATS), default="flamegraph",
                   help="the profile's format: a flame graph (SVG, default) or speedscope (JSON)")
    p.add_argument("-o", "--output", default=".", metavar="DIR",
                   help="where profiles are saved (default: here)")


def main(args: argparse.Namespace, conf: dict[str, Any], client: NimbusClient) -> int:
    page = client.request("GET", f"topology/{quote(args.name, safe='')}")
    reader = LogReader(conf)
    try:
        return run(client, Outputs(reader), page, args)
    finally:
        reader.close()
