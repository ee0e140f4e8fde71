"""Shared test components: a journal of what spouts saw, a durable broker,
and a gate bolt that holds tuples until the test releases them."""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any, Protocol

from squall import Bolt, Spout, Topology


class Journal:
    """Thread-safe record of spout callbacks, kept outside any worker so it
    survives worker restarts, like an external system would."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.emitted: list[Any] = []
        self.acked: list[Any] = []
        self.failed: list[Any] = []
        self.seen: list[Any] = []  # tuples bolts processed, as they choose to log them

    def add(self, kind: str, item: Any) -> None:
        with self.lock:
            getattr(self, kind).append(item)

    def count(self, kind: str) -> int:
        with self.lock:
            return len(getattr(self, kind))


class Broker:
    """A durable queue in the Kestrel/Kafka mould: a message stays owned by
    the broker until acked; a consumer that fails it, or disappears (a
    restarted worker reconnects), gets it back."""

    def __init__(self, messages: list[Any]) -> None:
        self.lock = threading.Lock()
        self.ready = list(reversed(messages))
        self.inflight: dict[Any, Any] = {}
        self.acks: Counter[Any] = Counter()
        self.total = len(messages)

    def connect(self) -> None:
        with self.lock:  # a new consumer: whatever was in flight is redelivered
            self.ready.extend(self.inflight.values())
            self.inflight.clear()

    def take(self) -> Any | None:
        with self.lock:
            if not self.ready:
                return None
            msg = self.ready.pop()
            self.inflight[msg[0]] = msg
            return msg

    def ack(self, msg_id: Any) -> None:
        with self.lock:
            if self.inflight.pop(msg_id, None) is not None:
                self.acks[msg_id] += 1

    def fail(self, msg_id: Any) -> None:
        with self.lock:
            msg = self.inflight.pop(msg_id, None)
            if msg is not None:
                self.ready.append(msg)

    @property
    def done(self) -> bool:
        with self.lock:
            return len(self.acks) == self.total and not self.inflight and not self.ready


class BrokerSpout(Spout):
    """Reliable spout over a Broker: message = (id, *values); id is the tup_id."""

    broker: Broker
    outputs = ["id", "body"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.broker.connect()

    def next_tuple(self) -> None:
        msg = self.broker.take()
        if msg is not None:
            self.emit(list(msg), tup_id=msg[0])

    def ack(self, tup_id: Any) -> None:
        self.broker.ack(tup_id)

    def fail(self, tup_id: Any) -> None:
        self.broker.fail(tup_id)


class Gate(Bolt):
    """Holds every tuple unacked until ``release`` is set, then acks on tick."""

    auto_ack = False
    release: threading.Event
    journal: Journal
    outputs = ["id"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.held: list[Any] = []

    def process(self, tup: Any) -> None:
        self.journal.add("seen", tup.values[0])
        self.held.append(tup)

    def process_tick(self, tup: Any) -> None:
        if self.release.is_set():
            for held in self.held:
                self.ack(held)
            self.held.clear()


def stay(predicate: Any, seconds: float = 0.3) -> bool:
    """The negative check: ``predicate`` keeps holding for a while (nothing happens)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not predicate():
            return False
        time.sleep(0.01)
    return True


class Log(Protocol):
    def add(self, kind: str, item: Any) -> None: ...


def numbers_spout(log: Log, limit: int, reliable: bool = True) -> type[Spout]:
    """Emits 1..limit once each (message id = the number when reliable); logs
    what it emitted and what it was told (acked, failed)."""

    class Numbers(Spout):
        outputs = ["n"]

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.i = 0

        def next_tuple(self) -> None:
            if self.i < limit:
                self.i += 1
                log.add("emitted", self.i)
                self.emit([self.i], tup_id=self.i if reliable else None)

        def ack(self, tup_id: Any) -> None:
            log.add("acked", tup_id)

        def fail(self, tup_id: Any) -> None:
            log.add("failed", tup_id)

    return Numbers


def gate(journal: Journal, release: threading.Event) -> type[Gate]:
    return type("HeldGate", (Gate,), {"journal": journal, "release": release})


def keyring_conf(directory: Any) -> dict[str, Any]:
    """Conf pointing at a cluster keyring in ``directory`` (made once): secure mode's
    ZooKeeper digest ACLs, nimbus's TLS and tokens, as production runs them."""
    from pathlib import Path

    from squall.security.keyring import Keyring

    path = Path(directory) / "keyring.json"
    if not path.exists():
        Keyring.create()[0].save(path)
    return {"squall.secure": True, "squall.keyring.path": str(path)}


def run_together(commands: list[list[str]], timeout: float = 60) -> None:
    """Start ``commands`` (children that print "ready", then wait for "go" on stdin), release
    them at once, and require every one to exit 0: two writers racing for real."""
    import subprocess

    procs = [subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for cmd in commands]
    try:
        for p in procs:
            assert p.stdout is not None
            assert p.stdout.readline().strip() == "ready"
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.close()
        for p in procs:
            assert p.wait(timeout=timeout) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            if p.stdout is not None:
                p.stdout.close()


class IdleNumbers(Spout):
    """A spout that emits nothing: for tests of scheduling, where no tuple need flow."""

    outputs = ["n"]

    def next_tuple(self) -> None:
        pass


class Discard(Bolt):
    def process(self, tup: Any) -> None:
        pass


class IdlePipeline(Topology):
    """Two components, nothing flowing: what nimbus's reconciliation tests assign."""

    numbers = IdleNumbers.spec()
    sink = Discard.spec(inputs=[numbers])


def sleeper_source(marker: str) -> str:
    """A Python module that, imported, leaves a grandchild in a session of its own (its
    command line holds ``marker``) and then takes its time: what a sandbox must kill whole."""
    return (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        os.execv(sys.executable,\n"
        f"                 [sys.executable, '-c', 'import time; time.sleep(600)', {marker!r}])\n"
        "    os._exit(0)\n"
        "time.sleep(600)\n")


def processes_marked(marker: str) -> list[Any]:
    """Processes whose command line holds ``marker`` (psutil.Process each)."""
    import psutil

    return [p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]


def make_wheel(directory: Any, name: str, version: str) -> Any:
    """A pure-Python wheel of one package ``name`` whose ``VERSION`` is ``version``, written
    into ``directory`` (no build tool, no network: a wheel is a zip with three metadata files)."""
    import base64
    import hashlib
    import zipfile
    from pathlib import Path

    info = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": f"VERSION = {version!r}\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: squall-tests\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n"}
    path = Path(directory) / f"{name}-{version}-py3-none-any.whl"
    record = []
    with zipfile.ZipFile(path, "w") as zf:
        for member, text in files.items():
            data = text.encode()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{member},sha256={digest},{len(data)}")
            zf.writestr(member, data)
        zf.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return path


def make_sdist(directory: Any, name: str, version: str, backend: str) -> Any:
    """A source distribution of ``name`` whose build backend is its own module, ``backend``
    (its source, in the sdist: pip imports it to build, which needs no build tool or network).
    What the module does on import runs when pip asks it anything."""
    import io
    import tarfile
    from pathlib import Path

    top = f"{name}-{version}"
    files = {"pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\n'
                               f'backend-path = ["."]\n[project]\nname = "{name}"\nversion = "{version}"\n',
             "backend.py": backend,
             "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"}
    path = Path(directory) / f"{top}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for member, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{member}")
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return path


PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def guide_script(page: Path) -> str:
    """A guide's Python blocks as one file, each on its own lines of the page, so that a
    traceback's line number is the page's (docs/api.md, docs/streams.md run as written)."""
    text = page.read_text()
    lines: list[str] = []
    for block in PYTHON_BLOCK.finditer(text):
        first = text.count("\n", 0, block.start(1))  # the block's first line, 0-based
        lines += [""] * (first - len(lines))
        lines += block.group(1).splitlines()
    return "\n".join(lines) + "\n"


def committed_states(db: Path, component: str) -> list[dict[str, Any]]:
    """Each task's checkpointed state of ``component`` as of its last commit, read from the
    topology's SQLite state file (none yet, or the first worker creating it: [])."""
    if not db.exists():
        return []
    try:
        with closing(sqlite3.connect(db, timeout=10)) as conn:
            rows = conn.execute("SELECT value FROM squall_state WHERE key LIKE ?",
                                (f"{component}/%/committed",)).fetchall()
    except sqlite3.OperationalError:
        return []
    records = [json.loads(value) for (value,) in rows]
    return [record["data"] for record in records if record]
