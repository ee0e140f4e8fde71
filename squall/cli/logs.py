"""``squall logs TOPOLOGY [--component C] [--follow] [--grep TEXT] [--events]``: the workers'
logs of a topology (with ``--events`` their events.log: the tuples ``squall debug`` samples),
read from each node's logviewer (squall.supervisor.logviewer) with the keyring's
CA and, for each logviewer, a token nimbus minted for it and this user (the keyring's own
token goes to nimbus only), each line led by the worker it came from.

Nimbus's topology page names every worker and its log link (Storm's ``workerLogLink``);
``--component`` keeps the workers that run the component and, of their lines, those the
component logged (``component=C``) with the lines that continue them (a trace); with
``--events``, the tuples it emitted (an event line's second field, squall.worker.event_lines).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from squall.cli.client import NimbusClient, credentials, http_client
from squall.errors import SquallError
from squall.supervisor.logfiles import EVENTS_LOG, WORKER_LOG

TAIL_BYTES = 16 * 1024  # of each worker's log, before following it
GREP_BYTES = 8 * 1024 * 1024  # searched with --grep
FOLLOW_BYTES = 1 << 20  # read at most each second
FOLLOW_SECS = 1.0
# A logviewer's token is asked for again when this share of its life has gone, so that a
# follow never sends one about to expire (nor one a skewed clock already calls expired).
TOKEN_RENEW_AT = 0.5
# A line an event starts with: structlog's console lines and JSON lines.
_EVENT_START = re.compile(rb"^(\d{4}-\d\d-\d\d[ T]\d\d:\d\d|\{)")


@dataclass(frozen=True)
class WorkerLog:
    worker: str  # host:port
    link: str  # its workerLogLink


def events_link(link: str) -> str:
    """A worker's log link -> the link of its events.log, beside it."""
    return link[:-len(WORKER_LOG)] + EVENTS_LOG if link.endswith(WORKER_LOG) else link


def worker_logs(page: dict[str, Any], component: str | None, events: bool = False) -> list[WorkerLog]:
    """The topology page's workers (those running ``component``, if given) and their links
    (of their events.log with ``events``); SquallError when one has none, saying why."""
    out = []
    for w in page.get("workers") or []:
        if component is not None and component not in (w.get("componentNumTasks") or {}):
            continue
        name = f"{w.get('host')}:{w.get('port')}"
        if not w.get("workerLogLink"):
            msg = (f"the node of worker {name} serves no logs (its supervisor runs no logviewer: "
                   "logviewer.port, and its log says why)")
            raise SquallError(msg)
        out.append(WorkerLog(name, events_link(w["workerLogLink"]) if events else w["workerLogLink"]))
    if not out:
        where = f"component {component!r} of " if component else ""
        msg = f"no worker runs {where}topology {page.get('name', '?')!r} now"
        raise SquallError(msg)
    return out


def component_lines(lines: Iterable[bytes], component: str | None) -> Iterator[bytes]:
    """The lines ``component`` logged and those continuing them (not starting an event of
    their own: a trace); every line when ``component`` is None."""
    if not component:
        yield from lines
        return
    name = re.escape(component.encode())
    mark = re.compile(rb"\bcomponent=" + name + rb"(\s|$)|\"component\": \"" + name + rb"\"")
    keep = False
    for line in lines:
        if _EVENT_START.match(line):
            keep = bool(mark.search(line))
        if keep:
            yield line


def event_lines(lines: Iterable[bytes], component: str | None) -> Iterator[bytes]:
    """The event lines of tuples ``component`` emitted (every line when None)."""
    if not component:
        yield from lines
        return
    name = component.encode()
    for line in lines:
        fields = line.split(b",", 2)
        if len(fields) > 2 and fields[1] == name:
            yield line


def logviewer_of(link: str) -> str:
    """The base URL of the logviewer a log link points at (what nimbus mints tokens for)."""
    parts = urlsplit(link)
    return f"{parts.scheme}://{parts.netloc}"


class LogReader:
    """Pages of worker logs from their logviewers, as this user: ``mint(base URL)`` asks
    nimbus for a token for each logviewer (None: an insecure cluster, none is sent)."""

    def __init__(self, conf: dict[str, Any], get: Callable[..., httpx.Response] | None = None,
                 mint: Callable[[str], Any] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        token, context = credentials(conf)
        self.client = http_client(context, timeout=30)
        self.get = get or self.client.get
        self.mint = mint or (NimbusClient.for_conf(conf, timeout=30).logviewer_token if token else None)
        self.clock = clock
        self._tokens: dict[str, tuple[str | None, float]] = {}  # logviewer -> (token, when to renew)

    def close(self) -> None:
        self.client.close()

    def token(self, link: str, fresh: bool = False) -> str | None:
        """The token for the logviewer of ``link``: the one held, or a new one from nimbus."""
        if self.mint is None:
            return None
        base = logviewer_of(link)
        held = self._tokens.get(base)
        if held is not None and not fresh and self.clock() < held[1]:
            return held[0]
        answer = self.mint(base)
        token = answer.get("token") if isinstance(answer, dict) else None
        life = float(answer.get("expires_in_secs") or 0) if isinstance(answer, dict) else 0.0
        self._tokens[base] = (token, self.clock() + life * TOKEN_RENEW_AT)
        return token

    def page(self, log: WorkerLog, start: int | None, length: int) -> tuple[bytes, int, int]:
        """(bytes, start, size) of the page of ``log``."""
        url = log.link + f"&length={length}" + (f"&start={start}" if start is not None else "")
        answer = logviewer_get(self, url, log.link, log.worker, "log")
        return answer.content, int(answer.headers["X-Log-Start"]), int(answer.headers["X-Log-Size"])


def logviewer_get(reader: Any, url: str, link: str, worker: str, what: str,
                  accept: str = "text/plain") -> httpx.Response:
    """GET ``url`` from the logviewer of ``link`` as ``reader``'s user (a :class:`LogReader`,
    or what has its ``get``, ``token`` and ``mint``), a token refused as expired renewed once;
    SquallError naming ``worker`` and ``what`` it read for anything but a 200."""
    def ask(fresh: bool) -> httpx.Response:
        headers = {"Accept": accept}
        token = reader.token(link, fresh)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return reader.get(url, headers=headers)

    try:
        answer = ask(fresh=False)
        if answer.status_code == 401 and reader.mint is not None:  # expired early (a clock off): once more
            answer = ask(fresh=True)
    except httpx.TransportError as e:
        msg = f"worker {worker}'s logviewer did not answer ({type(e).__name__}: {e})"
        raise SquallError(msg) from e
    if answer.status_code != 200:
        try:
            why = answer.json().get("error")
        except ValueError:
            why = answer.reason_phrase
        msg = f"worker {worker}'s {what}: {why} (HTTP {answer.status_code})"
        raise SquallError(msg)
    return answer


def _print(worker: str, data: bytes, component: str | None, grep: str | None, out: Any,
           events: bool = False) -> int:
    shown = 0
    for line in (event_lines if events else component_lines)(data.splitlines(), component):
        if grep is None or grep.encode() in line:
            out.write(f"{worker}  {line.decode(errors='replace')}\n")
            shown += 1
    out.flush()
    return shown


def show(reader: LogReader, logs: list[WorkerLog], component: str | None, grep: str | None, follow: bool,
         out: Any = sys.stdout, sleep: Callable[[float], None] = time.sleep,
         rounds: int | None = None, events: bool = False) -> None:
    """Each worker's last lines (TAIL_BYTES; GREP_BYTES with ``grep``), then, following, what
    each log gains, a second at a time (``rounds``: how many, for tests; None: until ^C)."""
    offsets: dict[str, int] = {}
    shown = 0
    for log in logs:
        data, start, size = reader.page(log, None, GREP_BYTES if grep else TAIL_BYTES)
        if start > 0:
            data = data.split(b"\n", 1)[1] if b"\n" in data else b""  # its first line is cut
        shown += _print(log.worker, data, component, grep, out, events)
        offsets[log.worker] = size
    if not shown and events:
        what = f" of component {component!r}" if component else ""
        print(f"no sampled tuple{what} in the last part of {len(logs)} worker events.log(s): "
              f"squall debug starts sampling", file=sys.stderr)
    elif not shown and (component or grep):
        # Nothing matched: say so, rather than print nothing as if all were well.
        what = " and ".join(f for f in (component and f"logged by component {component!r}",
                                         grep and f"holding {grep!r}") if f)
        print(f"no line {what} in the last part of {len(logs)} worker log(s); a component that "
              f"logs nothing at the current level shows none (squall set_log_level raises it)",
              file=sys.stderr)
    done = 0
    while follow and (rounds is None or done < rounds):
        sleep(FOLLOW_SECS)
        done += 1
        for log in logs:
            offset = offsets[log.worker]
            data, _start, size = reader.page(log, offset, FOLLOW_BYTES)
            if size < offset:  # rotated since: the new file from its start
                offset = 0
                data, _start, size = reader.page(log, 0, FOLLOW_BYTES)
            complete = data[:data.rfind(b"\n") + 1]  # a line still being written waits
            offsets[log.worker] = offset + len(complete)
            _print(log.worker, complete, component, grep, out, events)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="the topology's name or id")
    p.add_argument("-c", "--component", help="only the workers running it, and its own lines")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing what the logs gain (^C stops)")
    p.add_argument("--grep", help="only lines holding this text")
    p.add_argument("--events", action="store_true",
                   help="their events.log instead: the tuples squall debug samples (with -c: that "
                        "component's)")
