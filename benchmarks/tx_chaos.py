"""Exactly-once under chaos: a transactional word count on a real cluster,
broken again and again while it commits, then checked word by word.

    python benchmarks/tx_chaos.py --runs N [--seed S] [--chaos-secs 60] [--out DIR] [--keep]
    python benchmarks/tx_chaos.py --runs 1 --quick      # a smoke run: 1,000 sentences, 20 s of chaos

Each run starts a dev cluster in a directory of its own (ZooKeeper, nimbus,
3 supervisors with 2 slots each, secure as by default, failure detection in
seconds), writes ``--sentences`` random sentences (seed: ``--seed`` plus the
run's index) and submits benchmarks/topologies/tx_chaos_wordcount.py on 4
workers.  Its spout releases the sentences over time, at ``--rate`` a second
(by default slow enough that the last is released about as the chaos ends), and
its committer adds each batch's word counts to SQLite by Storm's documented
rule: a word whose stored txid is the batch's is skipped.

Once the first words are committed, a fault every 4-8 s for ``--chaos-secs``,
chosen by the run's seeded RNG: SIGKILL of a random worker; SIGKILL of a
whole node (a supervisor and its workers), restarted 12-20 s later, so that
nimbus has time to move its workers; SIGKILL of nimbus, restarted 3 s later;
and once per run SIGKILL of ZooKeeper, restarted 3-6 s later.  At most one
node is down at a time, so 4 slots are always left for the 4 workers.
Then everything still down is restarted, and the run waits (at most
``SETTLE_SECS``, else "timeout") until the counts equal the expected ones
("exact"), or stop moving while commits go on ("inexact"), or no commit
comes for ``STALL_SECS`` ("stalled").

The table has one row per run: words expected and committed, duplicated
(the sum over words of what was counted beyond the expected count), lost
(the sum of what is missing), distinct txids committed, faults injected
(w worker, n node, m nimbus, x zombie, z ZooKeeper), and, for information, how
often nimbus moved the topology's workers (assignments whose slots changed), the
"transactional coordinator started" lines in the worker logs, lines that
mention "superseded", error lines, and (task, txid) pairs committed more than
once.  A run's directory (cluster logs, data, commit logs, faults.log) is
kept under ``--out`` when it was not exact or with ``--keep``.  The exit
status is 1 if any run was not exact.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import itertools
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from squall.cli.devcluster import DevCluster  # noqa: E402
from squall.runtime.logging import configure_logging  # noqa: E402

TOPOLOGY_FILE = REPO / "benchmarks" / "topologies" / "tx_chaos_wordcount.py"
NAME = "tx-chaos"
VOCAB = [f"w{i:03d}" for i in range(200)]
SUPERVISORS, SLOTS, WORKERS = 3, 2, 4

# Failure detection in seconds, as benchmarks/machine_kill.py: a dead node's
# supervisor misses its heartbeats, its workers theirs, and nimbus reassigns them.
CLUSTER_CONF: dict[str, Any] = {
    "nimbus.monitor.freq.secs": 1,
    "nimbus.supervisor.timeout.secs": 5,
    "nimbus.task.timeout.secs": 5,
    "supervisor.heartbeat.frequency.secs": 1,
    "supervisor.assignments.sync.secs": 1,
    "supervisor.worker.timeout.secs": 5,
    "worker.heartbeat.frequency.secs": 1,
}

# Every wait is bounded (seconds).
START_SECS = 120  # the cluster answers
SUBMIT_SECS = 120  # the CLI's submit returns
FIRST_COMMIT_SECS = 120  # the first words committed after the submit
SETTLE_SECS = 240  # after the chaos, at most this long for the counts to be complete
STALL_SECS = 90  # no commit at all for this long after the chaos: stalled
QUIET_SECS = 20  # counts unchanged this long while commits go on: settled
RELEASE_LEAD_SECS = 10  # roughly, from the submit to the first commit (for the default --rate)
FAULT_GAP_SECS = (4.0, 8.0)
# Long enough for nimbus to move the node's workers: its ZooKeeper session expires
# (6 s) and nimbus.task.timeout.secs passes (5 s), or a new leader's grace does.
NODE_DOWN_SECS = (12.0, 20.0)
NIMBUS_DOWN_SECS = 3.0
ZK_DOWN_SECS = (3.0, 6.0)
FAULT_WEIGHTS = {"worker": 2, "node": 2, "nimbus": 1, "zombie": 2}  # a nimbus kill blinds nimbus 5-15 s
# A zombie lives this long after its replacement is assigned (the stale supervisor's kill),
# and never longer than ZOMBIE_MAX_SECS in all.
ZOMBIE_AFTER_MOVE_SECS = (2.0, 5.0)  # the replacement takes 1-2 s to start its coordinator
ZOMBIE_MAX_SECS = 40.0
COORDINATOR = "sentences/coordinator"
# A worker logs JSON lines; what it prints before its logging is set up is plain text.
ERROR_MARKS = ('"level": "error"', '"level": "critical"', "[error", "[critical", "Traceback (most recent")
CODES = {"worker": "w", "node": "n", "nimbus": "m", "zookeeper": "z", "zombie": "x"}


class Timeout(Exception):
    """The run's hard timeout went off."""


def say(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


@dataclass
class Result:
    run: int
    seed: int
    status: str = "error"
    expected: int = 0
    committed: int = 0
    duplicated: int = 0
    lost: int = 0
    txids: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    coordinators: int = 0
    superseded: int = 0
    errors: int = 0
    recommits: int = 0
    moves: int = 0
    secs: float = 0.0

    @property
    def exact(self) -> bool:
        return self.status == "exact"


class RunData:
    """A run's input (sentences, start time) and what its committers wrote."""

    def __init__(self, root: Path, sentences: int, rng: random.Random) -> None:
        self.dir = root
        root.mkdir(parents=True, exist_ok=True)
        self.sentences = [" ".join(rng.choices(VOCAB, k=rng.randint(3, 10))) for _ in range(sentences)]
        self.expected = Counter(w for s in self.sentences for w in s.split())
        (root / "sentences.json").write_text(json.dumps(self.sentences))
        self.db = root / "counts.sqlite"
        with contextlib.closing(sqlite3.connect(self.db, timeout=30)) as conn:
            conn.execute("PRAGMA journal_mode=WAL")  # the driver reads while committers write

    def release_from_now(self) -> None:
        """Sentence i is released i / rate seconds after this (wall clock: all processes read it)."""
        (self.dir / "start.json").write_text(json.dumps({"start": time.time()}))

    def counts(self) -> dict[str, int]:
        try:
            with contextlib.closing(sqlite3.connect(self.db, timeout=30)) as conn:
                return dict(conn.execute("SELECT word, n FROM counts"))
        except sqlite3.OperationalError:  # no table until the first commit
            return {}

    def commits(self) -> list[list[str]]:
        """Every commit log line, split: txid, attempt id, epoch (may be absent), pid, task."""
        return [line.split() for path in sorted(self.dir.glob("commits-*.log"))
                for line in path.read_text().splitlines() if line.strip()]


class Chaos:
    """Injects the faults and restarts what it killed when it is due."""

    def __init__(self, cluster: DevCluster, rng: random.Random, secs: float, log: Path,
                 faults: Counter[str]) -> None:
        self.cluster = cluster
        self.rng = rng
        self.log = log
        self.faults = faults  # kind -> how many injected, filled as they are
        self.down: dict[str, float] = {}  # "zookeeper" | "nimbus-0" | "supervisor-<i>" -> restart time
        self.zk_at = rng.uniform(0.2, 0.5) * secs  # ZooKeeper goes down once, at the first fault after this
        self.zk_done = False
        self.zombies: list[Zombie] = []
        self.t0 = time.monotonic()

    def note(self, text: str) -> None:
        line = f"t={time.monotonic() - self.t0:6.1f}s {text}"
        say(line)
        with open(self.log, "a") as f:
            f.write(line + "\n")

    def inject(self, remaining: float) -> None:
        if any(z.proc.poll() is None for z in self.zombies):
            return  # no other fault while a zombie runs: nimbus must see its node die and move it
        elapsed = time.monotonic() - self.t0
        if not self.zk_done and "zookeeper" not in self.down and (
                elapsed >= self.zk_at or remaining < FAULT_GAP_SECS[1]):
            kind = "zookeeper"
        else:
            weights = dict(FAULT_WEIGHTS)
            if "nimbus-0" in self.down:
                weights.pop("nimbus")
            if any(key.startswith("supervisor-") for key in self.down):
                weights.pop("node")  # one node down at a time: 4 slots are left for 4 workers
                weights.pop("zombie")
            kind = self.rng.choices(list(weights), list(weights.values()))[0]
        getattr(self, f"kill_{kind}")()

    def kill_worker(self) -> None:
        workers = sorted(self.cluster.worker_pids().items())
        if not workers:
            self.note("no live worker to kill")
            return
        (node, port), pid = self.rng.choice(workers)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        self.faults["worker"] += 1
        self.note(f"SIGKILL worker pid {pid} (supervisor-{node}, port {port})")

    def kill_node(self) -> None:
        i = self.rng.randrange(SUPERVISORS)
        try:
            self.cluster.kill_supervisor_node(i)
        except psutil.NoSuchProcess:
            # A worker of the node exited meanwhile: kill the rest of them one by one.
            for (node, _port), pid in self.cluster.worker_pids().items():
                if node == i:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
        self.down[f"supervisor-{i}"] = time.monotonic() + self.rng.uniform(*NODE_DOWN_SECS)
        self.faults["node"] += 1
        self.note(f"SIGKILL node supervisor-{i} and its workers")

    def kill_zombie(self) -> None:
        """Issue 27's fault: the node that runs the coordinator dies, and a worker comes
        back there from the assignment it had (as a supervisor whose view was stale
        relaunched it), runs beside the replacement nimbus starts elsewhere, and is
        killed a moment after that replacement was assigned."""
        found = coordinator_slot(self.cluster)
        if found is None:
            self.note("no coordinator worker found: a node instead")
            self.kill_node()
            return
        i, port = found
        slot_dir = self.cluster.supervisor_dir(i) / "workers" / str(port)
        zombie_dir = self.log.parent / f"zombie-{len(self.zombies)}"
        zombie_dir.mkdir(mode=0o700)
        for name in ("assignment.json", "secrets.json"):
            if (slot_dir / name).exists():
                shutil.copy(slot_dir / name, zombie_dir / name)
                os.chmod(zombie_dir / name, 0o600)
        node = (self.cluster.supervisor_dir(i) / "node-id").read_text().strip()
        try:
            self.cluster.kill_supervisor_node(i)
        except psutil.NoSuchProcess:
            pass
        self.down[f"supervisor-{i}"] = time.monotonic() + self.rng.uniform(*NODE_DOWN_SECS)
        with open(zombie_dir / "worker.log", "ab") as out:
            proc = subprocess.Popen([sys.executable, "-m", "squall.worker", "--dir", str(zombie_dir),
                                     "--node", node], cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        self.zombies.append(Zombie(proc, port, time.monotonic() + ZOMBIE_MAX_SECS))
        self.faults["zombie"] += 1
        self.note(f"SIGKILL node supervisor-{i}; worker on port {port} relaunched there from its old "
                  f"assignment (pid {proc.pid})")

    def reap_zombies(self, now: float, heal: bool) -> None:
        for zombie in self.zombies:
            if zombie.proc.poll() is not None:
                continue
            if zombie.kill_at is None and moved_from(self.cluster, zombie.port):  # replacement assigned
                zombie.kill_at = now + self.rng.uniform(*ZOMBIE_AFTER_MOVE_SECS)
            if heal or now >= min(zombie.kill_at or zombie.kill_at_latest, zombie.kill_at_latest):
                zombie.proc.kill()
                zombie.proc.wait(10)
                self.note(f"SIGKILL the relaunched worker pid {zombie.proc.pid} (disallowed)")

    def kill_nimbus(self) -> None:
        self.cluster.kill_process("nimbus-0")
        self.down["nimbus-0"] = time.monotonic() + NIMBUS_DOWN_SECS
        self.faults["nimbus"] += 1
        self.note("SIGKILL nimbus-0")

    def kill_zookeeper(self) -> None:
        assert self.cluster.zk is not None
        self.cluster.zk.kill()
        self.down["zookeeper"] = time.monotonic() + self.rng.uniform(*ZK_DOWN_SECS)
        self.zk_done = True
        self.faults["zookeeper"] += 1
        self.note("SIGKILL ZooKeeper")

    def tick(self, heal: bool = False) -> None:
        """Restart what is due (everything, with ``heal``), and what died by itself."""
        self.reap_zombies(time.monotonic(), heal)
        for key in self.cluster.dead():
            if key not in self.down:
                self.note(f"{key} exited by itself: restarted in 1 s")
                self.down[key] = time.monotonic() + 1.0
        # ZooKeeper first: nimbus and the supervisors need it to come up.
        for key in sorted(self.down, key=lambda k: (k != "zookeeper", k)):
            if heal or time.monotonic() >= self.down[key]:
                del self.down[key]
                self.restart(key)

    def restart(self, key: str) -> None:
        if key == "zookeeper":
            self.cluster.start_zookeeper()  # waits until it answers (at most 30 s)
        elif key.startswith("nimbus-"):
            self.cluster.start_nimbus(int(key.split("-")[1]))
        else:
            self.cluster.start_supervisor(int(key.split("-")[1]))  # on the ports it had
        self.note(f"restarted {key}")


@dataclass
class Zombie:
    proc: subprocess.Popen[bytes]
    port: int
    kill_at_latest: float
    kill_at: float | None = None


def topology_info(cluster: DevCluster) -> dict[str, Any] | None:
    try:
        return cluster.api("GET", f"topologies/{NAME}")
    except OSError:  # nimbus down or not leader yet
        return None


def coordinator_slot(cluster: DevCluster) -> tuple[int, int] | None:
    """(supervisor index, port) of the worker that runs the coordinator."""
    from squall.topology.topology import definition_from_dict
    from squall.worker.plan import plan_topology

    info = topology_info(cluster)
    if info is None:
        return None
    plan = plan_topology(definition_from_dict(info["definition"]), overrides=info["conf"])
    ports = {w["port"] for w in info["workers"] for first, last in w["executors"]
             for t in range(first, last + 1) if plan.task_component[t] == COORDINATOR}
    return next((key for key in cluster.worker_pids() if key[1] in ports), None)


def moved_from(cluster: DevCluster, port: int) -> bool:
    """Has nimbus assigned the topology's workers without this slot?"""
    info = topology_info(cluster)
    return info is not None and bool(info["workers"]) and all(w["port"] != port for w in info["workers"])


# -- one run -----------------------------------------------------------------------


def submit(cluster: DevCluster, data: RunData, rate: float) -> None:
    args = [sys.executable, "-m", "squall.cli", "submit", str(TOPOLOGY_FILE), "--config",
            str(cluster.config_file), "--name", NAME, "--conf", f"squall.test.dir={data.dir}",
            "--conf", f"squall.test.release.per.sec={rate}", "--conf", f"topology.workers={WORKERS}"]
    done = subprocess.run(args, capture_output=True, text=True, cwd=REPO, timeout=SUBMIT_SECS, check=False)
    if done.returncode != 0:
        msg = f"submit failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        raise RuntimeError(msg)


def wait_first_commit(data: RunData) -> None:
    deadline = time.monotonic() + FIRST_COMMIT_SECS
    while not data.counts():
        if time.monotonic() > deadline:
            msg = f"no word committed within {FIRST_COMMIT_SECS}s of the submit"
            raise RuntimeError(msg)
        time.sleep(0.5)


def chaos(cluster: DevCluster, data: RunData, rng: random.Random, secs: float, faults: Counter[str]) -> None:
    breaker = Chaos(cluster, rng, secs, data.dir / "faults.log", faults)
    end = breaker.t0 + secs
    next_fault = breaker.t0 + rng.uniform(*FAULT_GAP_SECS)
    while time.monotonic() < end:
        breaker.tick()
        if time.monotonic() >= next_fault:
            breaker.inject(remaining=end - time.monotonic())
            next_fault = time.monotonic() + rng.uniform(*FAULT_GAP_SECS)
        time.sleep(0.25)
    breaker.tick(heal=True)


def settle(data: RunData, released_at: float) -> str:
    """Wait for the counts to be complete after the chaos; how it ended."""
    total = sum(data.expected.values())
    start = last_change = last_commit = time.monotonic()
    next_report = start + 10
    counts, lines = data.counts(), len(data.commits())
    while True:
        time.sleep(1.0)
        now = time.monotonic()
        new_counts, new_lines = data.counts(), len(data.commits())
        if new_counts != counts:
            last_change = last_commit = now
        elif new_lines != lines:
            last_commit = now
        counts, lines = new_counts, new_lines
        if counts == data.expected:
            return "exact"
        if now - last_commit > STALL_SECS:
            return "stalled"
        if now >= released_at and now - last_change > QUIET_SECS:
            return "inexact"  # commits go on, the counts do not move: they stay wrong
        if now - start > SETTLE_SECS:
            return "timeout"
        if now >= next_report:
            next_report = now + 10
            say(f"settling: {sum(counts.values())} of {total} words committed, "
                f"last change {now - last_change:.0f}s ago, last commit {now - last_commit:.0f}s ago")


ASSIGNED = re.compile(r"assignment written .*slots=(\[[^\]]*\]) topology=" + re.escape(NAME) + " ")


def scan_logs(cluster: DevCluster, result: Result) -> None:
    # Reassignments: nimbus's assignments of the topology whose slots are not the previous one's.
    slots: list[set[str]] = []
    for path in sorted((cluster.root / "logs").glob("nimbus-*.log")):
        text = path.read_text(errors="replace")
        slots += [set(ast.literal_eval(m.group(1))) for m in ASSIGNED.finditer(text)]
    result.moves = sum(1 for before, after in itertools.pairwise(slots) if after != before)
    # The workers' logs, and those of the workers relaunched from an old assignment.
    for path in [*cluster.root.glob("**/worker.log"), *cluster.root.parent.glob("data/zombie-*/worker.log")]:
        for line in path.read_text(errors="replace").splitlines():
            result.coordinators += "transactional coordinator started" in line
            result.superseded += "superseded" in line.lower()
            result.errors += any(mark in line for mark in ERROR_MARKS)


def measure(data: RunData, result: Result) -> None:
    got = data.counts()
    words = set(got) | set(data.expected)
    result.expected = sum(data.expected.values())
    result.committed = sum(got.values())
    result.duplicated = sum(max(0, got.get(w, 0) - data.expected[w]) for w in words)
    result.lost = sum(max(0, data.expected[w] - got.get(w, 0)) for w in words)
    commits = data.commits()
    result.txids = len({fields[0] for fields in commits})
    # (task, txid) committed more than once: a replayed commit, or two committers of one task.
    per_task = Counter((fields[-1], fields[0]) for fields in commits)
    result.recommits = sum(1 for n in per_task.values() if n > 1)
    if result.status == "exact" and got != data.expected:
        result.status = "inexact"


def one_run(index: int, args: argparse.Namespace) -> Result:
    seed = args.seed + index
    result = Result(run=index, seed=seed)
    rng = random.Random(seed)
    root = Path(args.out) / f"run-{index}"
    if root.exists():
        shutil.rmtree(root)
    data = RunData(root / "data", args.sentences, rng)
    cluster = DevCluster(root / "cluster", supervisors=SUPERVISORS, slots=SLOTS, conf=CLUSTER_CONF)
    started = time.monotonic()
    signal.alarm(int(START_SECS + SUBMIT_SECS + FIRST_COMMIT_SECS + args.chaos_secs + SETTLE_SECS + 120))
    try:
        say(f"run {index} (seed {seed}): starting the cluster in {cluster.root}")
        cluster.start(timeout=START_SECS)
        rate = args.rate or args.sentences / (args.chaos_secs + RELEASE_LEAD_SECS)
        data.release_from_now()
        released_at = time.monotonic() + args.sentences / rate
        submit(cluster, data, rate)
        say(f"run {index}: submitted, {args.sentences} sentences released at {rate:.0f}/s")
        wait_first_commit(data)
        say(f"run {index}: first commit after {time.monotonic() - started:.0f}s; "
            f"chaos for {args.chaos_secs:.0f}s")
        chaos(cluster, data, rng, args.chaos_secs, result.faults)
        say(f"run {index}: chaos over, waiting for the counts")
        result.status = settle(data, released_at)
    except Timeout:
        result.status = "timeout"
    except KeyboardInterrupt:  # ^C or SIGTERM: this run stops cleanly, and no other starts
        result.status = "interrupted"
    except Exception as e:  # noqa: BLE001 - the run failed; the table says so and the next run goes on
        say(f"run {index} failed: {type(e).__name__}: {e}")
        result.status = "error"
    finally:
        signal.alarm(0)
        measure(data, result)
        scan_logs(cluster, result)
        result.secs = time.monotonic() - started
        say(f"run {index}: {result.status}; stopping the cluster")
        cluster.stop()
    if result.exact and not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    else:
        say(f"run {index}: kept {root}")
    return result


# -- the table and main -----------------------------------------------------------


def table(results: list[Result]) -> str:
    lines = [("| run | seed | status | words expected | committed | duplicated | lost | txids | faults "
              "| reassignments | coordinators started | superseded | errors | recommits | secs |"),
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        faults = " ".join(f"{n}{CODES[k]}" for k, n in sorted(r.faults.items())) or "-"
        lines.append(f"| {r.run} | {r.seed} | {r.status} | {r.expected} | {r.committed} | {r.duplicated} "
                     f"| {r.lost} | {r.txids} | {sum(r.faults.values())} ({faults}) | {r.moves} "
                     f"| {r.coordinators} | {r.superseded} | {r.errors} | {r.recommits} | {r.secs:.0f} |")
    return "\n".join(lines)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1, help="run i uses seed + i")
    parser.add_argument("--chaos-secs", type=float, default=60.0)
    parser.add_argument("--sentences", type=int, default=4000)
    parser.add_argument("--rate", type=float, default=None,
                        help="sentences released a second (default: the last one as the chaos ends)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1,000 sentences, 20 s of chaos")
    parser.add_argument("--out", default=None, help="runs' directories (default /tmp/tx_chaos-<time>)")
    parser.add_argument("--keep", action="store_true", help="keep exact runs' directories too")
    args = parser.parse_args(argv)
    if args.quick:
        args.sentences, args.chaos_secs = 1000, 20.0
    if args.runs < 1 or args.sentences < 1 or args.chaos_secs <= 0:
        parser.error("--runs, --sentences and --chaos-secs must be positive")
    out = Path(args.out or f"/tmp/tx_chaos-{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    if out == REPO or REPO in out.parents:
        parser.error(f"--out must be outside the repository ({REPO})")
    args.out = str(out)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    configure_logging(stream=sys.stderr)  # the dev cluster's own lines: stdout is for the table
    def expire(signum: int, frame: Any) -> None:
        raise Timeout

    def terminate(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGALRM, expire)
    signal.signal(signal.SIGTERM, terminate)
    results: list[Result] = []
    for index in range(args.runs):
        results.append(one_run(index, args))
        if results[-1].status == "interrupted":
            break
    print(table(results))
    exact = sum(r.exact for r in results)
    print(f"exact runs: {exact} of {args.runs}")
    with contextlib.suppress(OSError):
        Path(args.out).rmdir()  # only if no run was kept
    return 0 if exact == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
