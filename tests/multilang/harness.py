"""Test harness for multilang: real child processes under a real local topology.

A :class:`Probe` feeds ``(cmd, arg)`` tuples to a shell bolt from an
in-process spout and records what comes out; the children in ``children/``
(pystorm, Squall's adapter, Node.js) obey the commands.  Every adapter is
described once in :data:`ADAPTERS` so tests can run over all of them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import structlog

from squall import Bolt, Grouping, LocalCluster, Spout, Stream, Topology
from squall.clock import Clock
from squall.multilang import MSGPACK_SERIALIZER, ShellBolt, ShellSpout
from squall.multilang.codec import codec_for
from squall.multilang.tap import transcript as read_transcript

CHILDREN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "children")
NODE = shutil.which("node")


@dataclass(frozen=True)
class Adapter:
    name: str
    bolt: list[str]
    spout: list[str]
    serializer: str  # "json" | "msgpack"

    @property
    def conf(self) -> dict[str, Any]:
        if self.serializer == "msgpack":
            return {"topology.multilang.serializer": MSGPACK_SERIALIZER}
        return {}

    @property
    def codec(self) -> Any:
        return codec_for(self.serializer)

    @property
    def pystorm(self) -> bool:
        return self.name.startswith("pystorm")

    @property
    def node(self) -> bool:
        return self.name.startswith("node")


PY = sys.executable
ADAPTERS = {
    "pystorm-json": Adapter("pystorm-json", [PY, "pystorm_bolt.py", "json"], [PY, "pystorm_spout.py", "json"],
                            "json"),
    "pystorm-msgpack": Adapter("pystorm-msgpack", [PY, "pystorm_bolt.py", "msgpack"],
                               [PY, "pystorm_spout.py", "msgpack"], "msgpack"),
    "squall-json": Adapter("squall-json", [PY, "squall_bolt.py"], [PY, "squall_spout.py"], "json"),
    "squall-msgpack": Adapter("squall-msgpack", [PY, "squall_bolt.py"], [PY, "squall_spout.py"], "msgpack"),
    "node": Adapter("node", [NODE or "node", "node_bolt.js"], [NODE or "node", "node_spout.js"], "json"),
}

SHELL_OUTPUTS = [
    Stream(["word"]),
    Stream(["n"], "counts"),
    Stream(["n"], "nowhere"),  # declared, no subscriber: task ids []
    Stream(["ids"], "ids"),
    Stream(["word"], "direct", direct=True),
    Stream(["value"], "echo"),
    Stream(["value"], "failme"),
    Stream(["info"], "info"),
]


class Probe:
    """Shared between the test and the in-process components (which outlive nothing)."""

    def __init__(self, replay: bool = False) -> None:
        self.lock = threading.Lock()
        self.queue: deque[tuple[int, list[Any]]] = deque()
        self.sent: dict[int, list[Any]] = {}
        self.acked: list[int] = []
        self.failed: list[int] = []
        self.received: list[tuple[int, str, str, list[Any]]] = []  # (sink task, stream, source, values)
        self.replay = replay
        self._next = 0

    def put(self, cmd: str, arg: Any = None) -> int:
        with self.lock:
            self._next += 1
            self.queue.append((self._next, [cmd, arg]))
            self.sent[self._next] = [cmd, arg]
            return self._next

    def take(self) -> tuple[int, list[Any]] | None:
        with self.lock:
            return self.queue.popleft() if self.queue else None

    def settle(self, msg_id: int, ok: bool) -> None:
        with self.lock:
            (self.acked if ok else self.failed).append(msg_id)
            if not ok and self.replay:
                self.queue.append((msg_id, self.sent[msg_id]))

    def record(self, task: int, stream: str, source: str, values: list[Any]) -> None:
        with self.lock:
            self.received.append((task, stream, source, values))

    def settled(self, *ids: int) -> bool:
        with self.lock:
            done = set(self.acked) | set(self.failed)
        return all(i in done for i in ids)

    def got(self, stream: str, source: str | None = None) -> list[list[Any]]:
        with self.lock:
            return [v for _t, s, src, v in self.received if s == stream and (source is None or src == source)]

    def got_with_task(self, stream: str) -> list[tuple[int, list[Any]]]:
        with self.lock:
            return [(t, v) for t, s, _src, v in self.received if s == stream]


class FeedSpout(Spout):
    probe: Probe
    outputs: Any = ("cmd", "arg")

    def next_tuple(self) -> None:
        item = self.probe.take()
        if item is not None:
            self.emit(item[1], tup_id=item[0])

    def ack(self, tup_id: Any) -> None:
        self.probe.settle(tup_id, True)

    def fail(self, tup_id: Any) -> None:
        self.probe.settle(tup_id, False)


class SinkBolt(Bolt):
    """Records everything; fails tuples whose first value starts with FAIL."""

    probe: Probe

    def process(self, tup: Any) -> None:
        values = list(tup.values)
        self.probe.record(self.context.task_id, tup.stream, tup.component, values)
        if isinstance(values[0], str) and values[0].startswith("FAIL"):
            from squall import FailedException

            raise FailedException("asked to")


class FailerBolt(Bolt):
    probe: Probe

    def process(self, tup: Any) -> None:
        from squall import FailedException

        self.probe.record(self.context.task_id, tup.stream, tup.component, list(tup.values))
        raise FailedException("failme")


def bolt_topology(adapter: Adapter, probe: Probe, conf: dict[str, Any] | None = None,
                  **shell_options: Any) -> type[Topology]:
    """feed -> shell (the adapter's kitchen bolt) -> sink (par 2) and failer."""
    feed = type("Feed", (FeedSpout,), {"probe": probe}).spec()
    shell_options.setdefault("command", adapter.bolt[0])
    shell_options.setdefault("args", adapter.bolt[1:])
    shell_options.setdefault("cwd", CHILDREN)
    shell = ShellBolt.spec(outputs=SHELL_OUTPUTS, inputs=[feed], **shell_options)
    sink = type("Sink", (SinkBolt,), {"probe": probe}).spec(par=2, inputs={
        shell: Grouping.SHUFFLE, shell["counts"]: Grouping.fields("n"), shell["ids"]: Grouping.SHUFFLE,
        shell["direct"]: Grouping.DIRECT, shell["echo"]: Grouping.SHUFFLE, shell["info"]: Grouping.SHUFFLE,
    })
    failer = type("Failer", (FailerBolt,), {"probe": probe}).spec(inputs=[shell["failme"]])
    config = {**adapter.conf, **(conf or {})}
    return Topology.from_specs(f"Bolt_{adapter.name.replace('-', '_')}",
                               {"feed": feed, "shell": shell, "sink": sink, "failer": failer}, config)


def spout_topology(adapter: Adapter, probe: Probe, items: list[Any], conf: dict[str, Any] | None = None,
                   replay: bool = False, **shell_options: Any) -> type[Topology]:
    """shell spout (the adapter's kitchen spout) -> sink (par 2)."""
    shell_options.setdefault("command", adapter.spout[0])
    shell_options.setdefault("args", adapter.spout[1:])
    shell_options.setdefault("cwd", CHILDREN)
    spout = ShellSpout.spec(outputs=[Stream(["sentence"]), Stream(["event"], "events")], **shell_options)
    sink = type("Sink", (SinkBolt,), {"probe": probe}).spec(par=2, inputs={spout: Grouping.SHUFFLE,
                                                                          spout["events"]: Grouping.SHUFFLE})
    config = {**adapter.conf, "test.spout.items": items, "test.spout.replay": replay, **(conf or {})}
    return Topology.from_specs(f"Spout_{adapter.name.replace('-', '_')}", {"spout": spout, "sink": sink},
                               config)


def events(probe: Probe) -> list[Any]:
    return [json.loads(v[0]) for v in probe.got("events")]


def shells(runner: Any, component: str = "shell") -> list[Any]:
    """The live ShellBolt/ShellSpout instances of ``component``."""
    out = []
    for worker in runner.workers:
        for executor in worker.executors if worker is not None else ():
            if executor.component != component:
                continue
            for holder in (list(getattr(executor, "bolts", {}).values())
                           + list(getattr(executor, "spouts", []))):
                out.append(holder.bolt if hasattr(holder, "bolt") else holder.spout)
    return out


def shell(runner: Any, component: str = "shell", timeout: float = 10.0) -> Any:
    """The one live instance of ``component``, once its first child is up."""
    from squall.testing import poll_for

    def ready() -> Any:
        # Up, or already on a later child (one that dies at once is seldom seen up).
        found = [s for s in shells(runner, component)
                 if getattr(s, "proc", None) is not None or getattr(s, "restarts", 0) > 0]
        return found[0] if len(found) == 1 else None

    return poll_for(ready, timeout, f"{component} to start its child")


def errors(runner: Any, text: str = "") -> list[Any]:
    return [e for e in list(runner.errors) if text in e.error]


def transcript(tap_dir: str, codec: Any, name: str | None = None) -> list[tuple[str, float, Any]]:
    """Every message of one child's tap (the first child of the only tapped component by default)."""
    files = sorted(f for f in os.listdir(tap_dir)
                   if f.endswith(".tap") and (name is None or f.startswith(name)))
    assert files, f"no tap files in {tap_dir}"
    return read_transcript(os.path.join(tap_dir, files[0]), codec)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); count it as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@contextlib.contextmanager
def captured_logs() -> Iterator[list[dict[str, Any]]]:
    """structlog events from every thread, at every level (set before the topology starts)."""
    cap = structlog.testing.LogCapture()
    old = structlog.get_config()
    structlog.configure(processors=[cap], wrapper_class=structlog.make_filtering_bound_logger(0),
                        cache_logger_on_first_use=False)
    try:
        yield cap.entries
    finally:
        structlog.configure(**old)


@contextlib.contextmanager
def running(topology: type[Topology], name: str = "ml", conf: dict[str, Any] | None = None,
            clock: Clock | None = None) -> Iterator[Any]:
    with LocalCluster(clock=clock) as cluster:
        runner = cluster.submit(name, topology, conf)
        yield runner
