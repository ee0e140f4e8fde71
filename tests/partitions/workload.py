"""Workloads of the partition tests: a client feeding word counts, the history it
records, and each topology's final state read back for the checker.

The client appends messages (``id sentence``) to each workload's queue file at a
steady rate, each an ``emit`` invocation in that workload's history (process:
the message id, one operation each).  An observer thread completes them ``ok``
when the topology says it is done with them -- the at-least-once count's spout
acked the id, the transactional count committed the id's marker, the Trident count
the marker and each of the id's words (:meth:`TridentCount.finished`) -- as
the recorder sees it (its clock, never a node's).  Readers send DRPC reads of the
Trident count, each a ``read`` of its own.  Once the schedule has run and the
network is healed, :meth:`Client.wait_done` waits until every message is
complete (a message never completed is lost to liveness, and fails the run), and
the counts are read once they stop moving.

The leader audit reads the nimbuses' logs as they are written: "leadership term
began/ended" (the term's token) and "assignment written" (writer, term, and the
write's zxid, ZooKeeper's own order of writes).
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import closing
from pathlib import Path
from typing import Any

from squall.clock import Clock
from squall.drpc import DRPCClient
from tests.partitions import checker
from tests.partitions.history import History, Op
from tests.partitions.leaders import Term, Write, audit
from tests.partitions.nemesis import play

# Beside the cluster tests' topologies, whose parts they import as sibling modules.
TOPOLOGIES = Path(__file__).resolve().parents[1] / "cluster" / "topologies"
VOCAB = [f"w{i:02d}" for i in range(30)]
# How often the client looks for completions: the resolution of the latencies it measures.
OBSERVE_SECS = 0.02
WORDS_PER_SENTENCE = 6


class Workload:
    """One topology, its queue directory and its history."""

    file = TOPOLOGIES / "queue_wordcount.py"
    topology: str | None = None  # the class in ``file``, when it has several

    def __init__(self, root: Path, name: str, conf: Iterable[str] = (),
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.dir = root / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dir.chmod(0o777)  # workers may run as their topology's own user
        self.queue = (self.dir / "queue.log").open("a", buffering=1)
        self.history = History(clock)
        self.conf = list(conf)
        self.open: dict[int, Op] = {}
        self.done: set[int] = set()
        self.read_to: dict[Path, int] = {}  # how far each source of completions was read
        self.lock = threading.Lock()

    def submit(self, cli: Callable[..., Any]) -> None:
        which = ["--topology", self.topology] if self.topology else []
        cli("submit", str(self.file), "--name", self.name, *which, "--conf", f"squall.test.dir={self.dir}",
            *(c for kv in self.conf for c in ("--conf", kv)))

    def emit(self, key: int, words: list[str]) -> None:
        with self.lock:
            self.open[key] = self.history.invoke(key, "emit", {"id": key, "words": words})
        self.queue.write(f"{key} {' '.join(words)}\n")  # one write: a reader never sees half a line

    def observe(self) -> None:
        """Complete ``ok`` whatever the topology has finished since the last call."""
        for key in self.finished() - self.done:
            with self.lock:
                invocation = self.open.pop(key, None)
                if invocation is not None:
                    self.history.ok(invocation, {"id": key})
            self.done.add(key)

    def close(self) -> None:
        self.queue.close()

    def pending(self) -> int:
        with self.lock:
            return len(self.open)

    # -- what a topology defines --

    def finished(self) -> set[int]:
        raise NotImplementedError

    def counts(self) -> Counter[str]:
        raise NotImplementedError

    def check(self, counts: Counter[str]) -> checker.Verdict:
        raise NotImplementedError


class AtLeastOnce(Workload):
    """Every acked message's words counted (replays may count twice)."""

    topology = "AtLeastOnceWordCount"

    def finished(self) -> set[int]:
        """The ids acked since the last call (acked.log read on from where it was left)."""
        path = self.dir / "acked.log"
        if not path.exists():
            return set()
        with path.open("rb") as f:
            f.seek(self.read_to.get(path, 0))
            data = f.read()
        complete = data[:data.rfind(b"\n") + 1]
        self.read_to[path] = self.read_to.get(path, 0) + len(complete)
        return {int(line) for line in complete.split()}

    def counted(self) -> list[tuple[str, str, str]]:
        """(message id, index, word) of every word the count bolts wrote, replays included."""
        lines = (line.split() for p in self.dir.glob("counted-*.log") for line in p.read_text().splitlines())
        return [(parts[0], parts[1], parts[2]) for parts in lines if len(parts) == 3]

    def counts(self) -> Counter[str]:
        return Counter(word for _mid, _index, word in self.counted())

    def check(self, counts: Counter[str]) -> checker.Verdict:
        return checker.at_least_once(self.history.ops, counts)

    def replayed(self) -> tuple[int, int]:
        """(messages, words) counted more than once: the replays that reached the count."""
        seen = Counter((mid, index) for mid, index, _word in self.counted())
        again = {key: n - 1 for key, n in seen.items() if n > 1}
        return len({mid for mid, _index in again}), sum(again.values())


def _query(path: Path, sql: str, params: tuple[Any, ...]) -> list[Any]:
    """Rows of a read-only query of a Squall SQLite store; [] until it exists."""
    if not path.exists():
        return []
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)) as db:
            return db.execute(sql, params).fetchall()
    except sqlite3.OperationalError:  # the table not made yet, or busy: next time
        return []


def _rows(path: Path, namespace: str) -> list[tuple[str, Any]]:
    """(key, JSON value) of a store's ``namespace``."""
    rows = _query(path, "SELECT key, value FROM squall_state WHERE namespace = ?", (namespace,))
    return [(key, json.loads(value)) for key, value in rows]


def _new_rows(path: Path, namespace: str, after: int) -> list[tuple[int, str, str]]:
    """(rowid, key, value) of the rows of ``namespace`` written after rowid ``after``."""
    return _query(path, "SELECT rowid, key, value FROM squall_state WHERE namespace = ? AND rowid > ?",
                  (namespace, after))


class ExactlyOnce(Workload):
    """Each committed message's words counted once (the transactional topology)."""

    topology = "TransactionalWordCount"

    def _table(self) -> dict[str, int]:
        return {key: value["value"] for key, value in _rows(self.dir / "counts.sqlite", "default")}

    def stores(self) -> list[tuple[Path, str]]:
        """(SQLite file, namespace) of the counts."""
        return [(self.dir / "counts.sqlite", "default")]

    @staticmethod
    def word(key: str) -> str:
        return key

    def written(self) -> list[tuple[str, Any]]:
        """(word or "#<id>", JSON value) of the rows written since the last call: rows whose
        rowid is above the last seen (a write replaces its row, which takes a new rowid)."""
        out = []
        for path, namespace in self.stores():
            rows = _new_rows(path, namespace, self.read_to.get(path, 0))
            if rows:
                self.read_to[path] = max(rowid for rowid, _key, _value in rows)
            out += [(self.word(key), json.loads(value)) for _rowid, key, value in rows]
        return out

    def finished(self) -> set[int]:
        """The messages whose markers were written since the last call."""
        return {int(word[1:]) for word, _value in self.written() if word.startswith("#")}

    def counts(self) -> Counter[str]:
        return Counter({k: v for k, v in self._table().items() if not k.startswith("#")})

    def markers(self) -> Counter[str]:
        return Counter({k: v for k, v in self._table().items() if k.startswith("#")})

    def check(self, counts: Counter[str]) -> checker.Verdict:
        verdict = checker.exactly_once(self.history.ops, counts)
        twice = [checker.Finding("duplicated", k, f"message {k[1:]} committed {n} times")
                 for k, n in self.markers().items() if n != 1]
        if not twice:
            return verdict
        return checker.Verdict(False, (*verdict.findings, *twice), verdict.stats)


class TridentCount(ExactlyOnce):
    """The Trident count (an opaque SQLite map state), and DRPC reads of it while it runs:
    each read an operation of its own, checked by :func:`checker.reads`."""

    file = TOPOLOGIES / "trident_queue.py"
    topology = None

    def __init__(self, root: Path, name: str, conf: Iterable[str] = (),
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(root, name, [*conf, f"squall.state.dir={root / name}"], clock)
        self.reads = 0
        self.txids: dict[str, int] = {}  # key (a word, or "#<id>") -> the latest batch seen to write it
        self.marked: dict[int, int] = {}  # message id -> the batch that wrote its marker, not yet complete

    def finished(self) -> set[int]:
        """The messages whose every word is counted: the marker's batch ``t`` has written the
        marker, and each of the message's words carries batch ``t`` or a later one.

        The marker alone is not enough.  A batch's partitions write their keys one after
        the other (and a failed batch may have written some partitions before its replay
        writes the rest), so a read between the marker's write and a word's, in another
        partition, would see the word without this message: not yet committed, though the
        marker says otherwise.  A transactional spout replays a txid with the same
        messages, so a word's row at batch ``t`` or later holds this message's share."""
        for word, value in self.written():
            txid = value["txid"]
            self.txids[word] = max(txid, self.txids.get(word, txid))
            if word.startswith("#"):
                self.marked[int(word[1:])] = txid
        with self.lock:
            words = {mid: self.open[mid].value["words"] for mid in self.marked if mid in self.open}
        out = {mid for mid, txid in self.marked.items()
               if all(self.txids.get(w, -1) >= txid for w in words.get(mid, ()))}
        for mid in out:
            del self.marked[mid]
        return out

    def stores(self) -> list[tuple[Path, str]]:
        return [(path, "partitions") for path in self.dir.glob("*.sqlite")]

    @staticmethod
    def word(key: str) -> str:
        return str(json.loads(key)[0])  # a Trident map state's key: the JSON list of the group's values

    def _table(self) -> dict[str, int]:
        return {self.word(key): value["curr"] for path, ns in self.stores() for key, value in _rows(path, ns)}

    def read(self, execute: Callable[[str, str], str], word: str) -> None:
        """One DRPC read of ``word``'s count: ``ok`` with it, else ``info`` (a timeout, a cut,
        an error: a read changes nothing, and only answered ones are checked)."""
        process = f"reader-{threading.get_ident()}"
        invocation = self.history.invoke(process, "read", {"key": word})
        try:
            answer = json.loads(execute("words", word))
        except Exception as e:  # noqa: BLE001 - whatever it was, the history says so
            self.history.info(invocation, {"key": word, "error": f"{type(e).__name__}: {e}"[:200]})
            return
        count = answer[0][0] if answer and answer[0] and answer[0][0] is not None else 0
        self.history.ok(invocation, {"key": word, "count": count})
        self.reads += 1

    def check(self, counts: Counter[str]) -> checker.Verdict:
        counted = super().check(counts)
        reads = checker.reads(self.history.ops)
        return checker.Verdict(counted.valid and reads.valid, (*counted.findings, *reads.findings),
                               {**counted.stats, **reads.stats})


class Client:
    """Feeds every workload the same sentences, ``rate`` a second, while it runs, and
    observes their completions."""

    def __init__(self, workloads: list[Workload], rate: float = 30, seed: int = 1) -> None:
        self.workloads = workloads
        self.rate = rate
        self.rng = random.Random(seed)
        self.feeding = threading.Event()
        self.stopped = threading.Event()
        self.sent = 0
        self.threads = [threading.Thread(target=self._feed, daemon=True, name="client-feed"),
                        threading.Thread(target=self._observe, daemon=True, name="client-observe")]

    def start(self) -> Client:
        self.feeding.set()
        for t in self.threads:
            t.start()
        return self

    def stop_feeding(self) -> None:
        self.feeding.clear()

    def close(self) -> None:
        self.feeding.clear()
        self.stopped.set()
        for t in self.threads:
            t.join(10)

    def _feed(self) -> None:
        started = time.monotonic()
        while self.feeding.is_set():
            due = started + self.sent / self.rate
            if time.monotonic() < due:
                self.stopped.wait(due - time.monotonic())
                continue
            words = self.rng.choices(VOCAB, k=WORDS_PER_SENTENCE)
            for w in self.workloads:
                w.emit(self.sent, words)
            self.sent += 1

    def _observe(self) -> None:
        while not self.stopped.wait(OBSERVE_SECS):
            for w in self.workloads:
                w.observe()

    def wait_done(self, timeout: float) -> None:
        """Until every message of every workload is complete: progress, or a clear failure."""
        deadline = time.monotonic() + timeout
        while any(w.pending() for w in self.workloads):
            if time.monotonic() > deadline:
                left = {w.name: sorted(w.open)[:10] for w in self.workloads if w.pending()}
                msg = f"messages never completed after the heal ({timeout}s): {left}"
                raise AssertionError(msg)
            time.sleep(0.2)


class Reader:
    """Reads a Trident count's words through DRPC, one read at a time, ``rate`` a second."""

    def __init__(self, workload: TridentCount, execute: Callable[[str, str], str], rate: float = 5,
                 seed: int = 2) -> None:
        self.workload, self.execute, self.interval = workload, execute, 1 / rate
        self.rng = random.Random(seed)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"reader-{workload.name}")

    def start(self) -> Reader:
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self.stopped.wait(self.interval):
            self.workload.read(self.execute, self.rng.choice(VOCAB))

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(60)


def settled(read: Callable[[], Any], quiet: float = 3.0, timeout: float = 60.0) -> Any:
    """``read()`` once it has returned the same for ``quiet`` seconds."""
    deadline = time.monotonic() + timeout
    value, since = read(), time.monotonic()
    while time.monotonic() - since < quiet and time.monotonic() < deadline:
        time.sleep(0.3)
        now = read()
        if now != value:
            value, since = now, time.monotonic()
    return value


# -- the leader audit, from the nimbuses' logs ---------------------------------------------

_FIELD = re.compile(r"\b(leader|writer|term|zxid|topology|version)=([^\s,]+)")


class LeaderLog:
    """Tails the nimbus logs; terms and writes on the recorder's clock."""

    def __init__(self, paths: list[Path], clock: Callable[[], float] = time.monotonic) -> None:
        self.paths = paths
        self.offsets = {p: 0 for p in paths}
        self.clock = clock
        self.began: dict[int, tuple[str, float]] = {}
        self.ended: dict[int, float] = {}
        self.writes: list[Write] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="leader-log")

    def start(self) -> LeaderLog:
        self.thread.start()
        return self

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(10)
        self.poll()

    def _run(self) -> None:
        while not self.stopped.wait(0.1):
            self.poll()

    def poll(self) -> None:
        for path in self.paths:
            if not path.exists():
                continue
            with path.open("rb") as f:
                f.seek(self.offsets[path])
                data = f.read()
            complete = data.rpartition(b"\n")[0]
            self.offsets[path] += len(complete) + (1 if complete else 0)
            now = self.clock()
            for raw in complete.decode(errors="replace").splitlines():
                self._line(raw, now)

    def _line(self, line: str, now: float) -> None:
        fields = _fields(line)
        if "leadership term began" in line and "term" in fields:
            self.began.setdefault(int(fields["term"]), (fields.get("leader", "?"), now))
        elif "leadership term ended" in line and "term" in fields:
            self.ended.setdefault(int(fields["term"]), now)
        elif "assignment written" in line and fields.get("term") not in (None, "None", "null"):
            zxid = fields.get("zxid")
            self.writes.append(Write(fields.get("writer", "?"), int(fields["term"]), now,
                                     f"{fields.get('topology')} v{fields.get('version')}",
                                     int(zxid) if zxid and zxid.isdigit() else None))

    def terms(self) -> list[Term]:
        return [Term(node, token, start, self.ended.get(token))
                for token, (node, start) in self.began.items()]

    def audit(self) -> checker.Verdict:
        return audit(self.terms(), self.writes)


def _fields(line: str) -> dict[str, str]:
    if line.startswith("{"):
        try:
            return {k: str(v) for k, v in json.loads(line).items()}
        except ValueError:
            return {}
    return {k: v.strip("'\"") for k, v in _FIELD.findall(line)}


# -- a run: workloads under one schedule ----------------------------------------------------

class Run:
    """What one run left: each workload's history and verdict, the faults, the audit."""

    def __init__(self, workloads: list[Workload], nemesis: History, leaders: LeaderLog) -> None:
        self.workloads = workloads
        self.nemesis = nemesis
        self.leaders = leaders
        self.verdicts: dict[str, checker.Verdict] = {}
        self.audit: checker.Verdict | None = None

    def judge(self) -> None:
        """Each workload judged on its counts once they have stopped moving: all of them
        watched together, each still unchanged for the whole quiet time before it is read
        (one after the other, the quiet times added up)."""
        counts = settled(lambda: [w.counts() for w in self.workloads])
        for w, counted in zip(self.workloads, counts, strict=True):
            self.verdicts[w.name] = w.check(counted)
        self.audit = self.leaders.audit()

    def faults(self) -> list[Op]:
        return [op for op in self.nemesis.ops if op.type == "info"]

    def report(self) -> str:
        """The verdicts, each finding with its excerpt, and the faults played."""
        lines = ["faults:"] + [f"  {op.time:.1f} {op.f} {_args(op.value)}" for op in self.faults()]
        for name, verdict in [*self.verdicts.items(), ("leaders", self.audit)]:
            if verdict is None:
                continue
            lines.append(f"{name}: {'valid' if verdict.valid else 'INVALID'} {dict(verdict.stats)}")
            lines += [f"  {f.kind} {f.key}: {f.detail}\n    {list(f.excerpt)[:6]}"
                      for f in verdict.findings[:10]]
        return "\n".join(lines)

    def write(self, folder: Path) -> None:
        for w in self.workloads:
            w.history.write(folder / f"history-{w.name}.jsonl")
        self.nemesis.write(folder / "history-nemesis.jsonl")


def _args(value: dict[str, Any]) -> str:
    shown = {k: v for k, v in value.items() if k not in ("fault", "phase", "op", "result")}
    return " ".join(f"{k}={v}" for k, v in shown.items())


def run(cluster: Any, workloads: list[Workload], events: list[Any], *, rate: float = 30,
        warmup_acks: int = 20, after: float = 5.0, drain: float = 120.0) -> Run:
    """Submit ``workloads``, feed them, play ``events`` once each has completed
    ``warmup_acks`` messages, feed ``after`` seconds more, then drain and judge."""
    logs = cluster.root / "logs"
    nimbus_logs = [logs / f"{k}.log" for k in cluster.daemon_keys() if k.startswith("nimbus-")]
    leaders = LeaderLog(nimbus_logs).start()
    nemesis = History()
    for w in workloads:
        w.submit(cluster.cli)
    client = Client(workloads, rate=rate).start()
    tridents = [w for w in workloads if isinstance(w, TridentCount)]
    drpc = DRPCClient(cluster.conf, timeout=5) if tridents else None

    def execute(function: str, args: str) -> str:  # from the client node
        assert drpc is not None
        return cluster.net.threads("client").call(drpc.execute, function, args)

    readers = [Reader(w, execute, seed=i).start() for w in tridents for i in range(2)]
    result = Run(workloads, nemesis, leaders)
    try:
        deadline = time.monotonic() + 90
        while any(len(w.done) < warmup_acks for w in workloads):
            if time.monotonic() > deadline:
                msg = f"the topologies never got going: {[(w.name, len(w.done)) for w in workloads]}"
                raise AssertionError(msg)
            time.sleep(0.2)
        # Squall's clock: this machine's monotonic time, which no skew moves.
        play(events, cluster, nemesis, Clock(), leader=cluster.leader)
        time.sleep(after)
        client.stop_feeding()
        client.wait_done(drain)
        for reader in readers:
            reader.close()
        for w in tridents:  # once all has committed, a read of each word must say its count
            for word in VOCAB:
                w.read(execute, word)
    finally:
        for reader in readers:
            reader.close()
        client.close()
        leaders.close()
        if drpc is not None:
            drpc.close()
        for w in workloads:
            w.close()
    result.judge()
    return result
