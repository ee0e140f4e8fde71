"""A Squall cluster spread over network namespaces (tests/partitions/netns.py): the dev
cluster's daemons (squall.cli.devcluster), each started in its node with
``ip netns exec`` and told its node's address, secure as the dev cluster is (TLS,
tokens, CURVE, ZooKeeper ACLs: the keyring's certificate names every node's address).

Nodes: ``zk``, ``nimbus-a`` and ``nimbus-b``, ``sup-1``..``sup-N`` (the supervisors,
their workers in the same namespace), ``drpc`` (the DRPC server, a node of its own so
that a fault of a nimbus or a supervisor is not also one of DRPC) and ``client``, where
this process's client calls run (:meth:`NetnsCluster.api` and ``request`` in threads
that live there; :meth:`NetnsCluster.cli` in a process there).

A node's faults: :meth:`pause`/:meth:`resume` (SIGSTOP/SIGCONT every process in it),
:meth:`kill`/:meth:`restart`, :meth:`skew` (its daemons' wall clock, through
libfaketime); the network's (partitions, shaped links) are ``cluster.net``'s, which the
nemesis's methods below pass on to.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from squall.cli.devcluster import DevCluster, NimbusRequestError
from squall.config import DEFAULTS
from tests.partitions import netns
from tests.partitions.nemesis import Nodes
from tests.partitions.netns import Network

REPO = Path(__file__).resolve().parents[2]
# What skew_environment sets: the workers of a skewed node inherit them.
SKEW_VARIABLES = ("LD_PRELOAD", "FAKETIME_TIMESTAMP_FILE", "FAKETIME_CACHE_DURATION",
                  "FAKETIME_DONT_FAKE_MONOTONIC")
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")  # Debian's libfaketime
NIMBUS_NODES = ("nimbus-a", "nimbus-b")


def node_of_key(key: str) -> str:
    """The node of a dev-cluster daemon key: zookeeper -> zk, nimbus-0 -> nimbus-a,
    supervisor-0 -> sup-1, drpc -> drpc."""
    if key == "zookeeper":
        return "zk"
    if key.startswith("nimbus-"):
        return NIMBUS_NODES[int(key.split("-")[1])]
    if key.startswith("supervisor-"):
        return f"sup-{int(key.split('-')[1]) + 1}"
    return key


def faketime_fix() -> Path:
    """tests/partitions/faketime_fix.c built (once per content) into a preloadable library."""
    source = Path(__file__).with_name("faketime_fix.c")
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
    built = Path(tempfile.gettempdir()) / f"squall-faketime-fix-{digest}.so"
    if not built.exists():
        compiler = shutil.which("cc") or shutil.which("gcc")
        if compiler is None:
            msg = "no C compiler (cc) to build tests/partitions/faketime_fix.c"
            raise FileNotFoundError(msg)
        tmp = built.with_suffix(f".{os.getpid()}.tmp")
        subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(tmp), str(source), "-ldl"],
                       check=True, capture_output=True, timeout=60)
        tmp.replace(built)
    return built


def skew_environment(offset_file: Path) -> dict[str, str]:
    """A process's environment under libfaketime, its wall clock offset by what
    ``offset_file`` says (``+30s``, ``-5s``; re-read every second, so the offset changes
    live).  CLOCK_MONOTONIC is left real, as a machine whose clock is set wrong or
    stepped by NTP has it: Python's time.monotonic, and every timeout Squall measures
    with it, is unaffected; time.time, logs' timestamps and heartbeats' times are skewed.

    Debian bookworm's libfaketime 0.9.10 breaks a sleep on the real monotonic clock
    (Python's time.sleep fails with EINVAL, libfaketime issue 426, fixed after 0.9.10);
    faking the monotonic clock too is worse (waits on a lock last as long as the fake
    epoch, issue 390).  :func:`faketime_fix` is preloaded first and mends the former."""
    if not LIBFAKETIME.exists():
        msg = f"{LIBFAKETIME} is missing: apt-get install faketime (ops/bootstrap.sh --tests installs it)"
        raise FileNotFoundError(msg)
    values = (f"{faketime_fix()} {LIBFAKETIME}", str(offset_file), "1", "1")
    return {**os.environ, **dict(zip(SKEW_VARIABLES, values, strict=True))}


def faketime_sleep_works(offset_file: Path) -> bool:
    """Does time.sleep work in a Python under :func:`skew_environment`?"""
    proc = subprocess.run([sys.executable, "-c", "import time; time.sleep(0.01)"],
                          env=skew_environment(offset_file), capture_output=True, timeout=30, check=False)
    return proc.returncode == 0


class NetnsCluster(DevCluster):
    """A :class:`DevCluster` whose daemons each run in their node's namespace.  Start it
    with ``with NetnsCluster(root) as cluster:`` (network, then daemons; stopped and
    removed in the reverse order, whatever happened)."""

    def __init__(self, root: Path, supervisors: int = 3, nimbuses: int = 2, drpc: bool = True,
                 slots: int = 2, conf: dict[str, Any] | None = None, skewable: bool = False) -> None:
        """``skewable``: every nimbus and supervisor node starts under libfaketime (offset
        0), so that :meth:`skew` moves their clocks live."""
        if not 1 <= nimbuses <= len(NIMBUS_NODES):
            msg = f"nimbuses must be 1 or 2, not {nimbuses}"
            raise ValueError(msg)
        if skewable:
            # A node's workers read the same skewed clock as its daemons, as on a real machine:
            # they inherit libfaketime through the supervisor's allow-list.
            allow = (conf or {}).get("supervisor.worker.env.allow", DEFAULTS["supervisor.worker.env.allow"])
            conf = {**(conf or {}), "supervisor.worker.env.allow": [*allow, *SKEW_VARIABLES]}
        super().__init__(root, supervisors=supervisors, slots=slots, conf=conf, nimbuses=nimbuses,
                         secure=True, drpc=drpc)
        self.net = Network([*dict.fromkeys(node_of_key(k) for k in self.daemon_keys()), "client"])
        self.skewed: dict[str, Path] = {}  # node -> its offset file
        self.skewable = skewable

    # -- DevCluster's hooks ----------------------------------------------------------

    def host_of(self, key: str) -> str:
        return self.net.address(node_of_key(key))

    def launch_prefix(self, key: str) -> list[str]:
        return self.net.exec_prefix(node_of_key(key))

    def launch_env(self, key: str) -> dict[str, str] | None:
        offset = self.skewed.get(node_of_key(key))
        return skew_environment(offset) if offset is not None else None

    # -- life ------------------------------------------------------------------------

    def __enter__(self) -> NetnsCluster:
        self.net.create()
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self, timeout: float = 60.0) -> None:
        if self.skewable:
            self.root.mkdir(parents=True, exist_ok=True)
            for node in (*self.nodes().nimbuses, *self.nodes().supervisors):
                self.skew(node, 0)
        # In the client's namespace: ZooKeeper's readiness probe and root ACL, and nimbus's
        # answers, are reached from there (the root namespace has no route to the nodes).
        self.net.threads("client").call(super().start, timeout)

    def close(self) -> None:
        """Stop the daemons (by recorded pid, in the dev cluster's order), then remove the
        network (which SIGKILLs what is left in a node)."""
        try:
            self.stop()
        finally:
            self.net.close()

    # -- a client in the client node -------------------------------------------------

    def request(self, *args: Any, **kwargs: Any) -> Any:
        return self.net.threads("client").call(super().request, *args, **kwargs)

    def cli(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """``squall ARGS --config <the cluster's>`` run in the client node."""
        proc = subprocess.run([*self.net.exec_prefix("client"), sys.executable, "-m", "squall.cli", args[0],
                               "--config", str(self.config_file), *args[1:]],
                              capture_output=True, text=True, timeout=timeout, cwd=REPO, check=False)
        if check and proc.returncode != 0:
            msg = f"squall {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
            raise AssertionError(msg)
        return proc

    def nimbus_answers(self) -> bool:
        try:
            return bool(self.api("GET", "cluster")["leader"])
        except NimbusRequestError:
            return False

    # -- the nemesis's view (tests/partitions/nemesis.py) -----------------------------

    def nodes(self) -> Nodes:
        """The nodes a schedule picks from: not ``drpc`` nor ``client`` (the observers)."""
        nimbuses = [node_of_key(k) for k in self.daemon_keys() if k.startswith("nimbus-")]
        supervisors = [node_of_key(k) for k in self.daemon_keys() if k.startswith("supervisor-")]
        return Nodes(("zk",), tuple(nimbuses), tuple(supervisors))

    def leader(self) -> str:
        """The node of the nimbus that says it leads (asked of each, from the client node)."""
        for url in self.nimbus_urls():
            try:
                this = self.api("GET", "cluster", url=url).get("this") or {}
            except NimbusRequestError:
                continue
            if this.get("leader"):
                return self.net.node_of(url.split("://", 1)[1].rsplit(":", 1)[0])
        msg = "no nimbus says it leads"
        raise RuntimeError(msg)

    def partition(self, groups: list[list[str]]) -> None:
        """Nodes of different ``groups`` reach nothing of each other; nodes no group names
        (the client, DRPC) still reach everyone.  Replaces any earlier partition."""
        named = [n for g in groups for n in g]
        pairs = netns.blocked_pairs([set(g) for g in groups], named)
        self.net.heal()
        self.net.block(pairs)

    def isolate(self, node: str) -> None:
        """``node`` reaches no other node, nor any it (the client and DRPC included)."""
        self.net.isolate(node)

    def cut(self, a: str, b: str) -> None:
        self.net.cut(a, b)

    def heal(self) -> None:
        self.net.heal()

    def shape(self, node: str, rate_kbit: int = 0, loss_pct: float = 0) -> None:
        self.net.shape(node, rate_kbit=rate_kbit, loss_pct=loss_pct)

    def unshape(self, node: str) -> None:
        self.net.unshape(node)

    # -- a node's faults -------------------------------------------------------------

    def keys_of(self, node: str) -> list[str]:
        return [k for k in self.daemon_keys() if node_of_key(k) == node]

    def pause(self, node: str) -> list[int]:
        """SIGSTOP every process of ``node`` (daemons, workers, their children)."""
        return self.net.signal(node, signal.SIGSTOP)

    def resume(self, node: str) -> list[int]:
        return self.net.signal(node, signal.SIGCONT)

    def kill(self, node: str) -> list[int]:
        """SIGKILL every process of ``node``, as a machine that loses power."""
        pids = self.net.signal(node, signal.SIGKILL)
        for key in self.keys_of(node):
            proc = self.procs.get(key)
            if proc is not None:
                proc.wait(10)
        if node == "zk" and self.zk is not None:
            self.zk.kill()
        return pids

    def restart(self, node: str) -> None:
        """Start ``node``'s daemons again (after :meth:`kill`), with their old ports and
        state; returns once they are launched, not once they answer."""
        for key in self.keys_of(node):
            if key == "zookeeper":
                self.net.threads("client").call(self.start_zookeeper)
            elif key.startswith("nimbus-"):
                self.start_nimbus(int(key.split("-")[1]))
            elif key == "drpc":
                self.start_drpc()
            else:
                self.start_supervisor(int(key.split("-")[1]))

    def skew(self, node: str, secs: float) -> None:
        """``node``'s wall clock ``secs`` off from now on: live for daemons started
        skewed (the offset file is re-read every second), else from their next
        :meth:`restart` (see :func:`skew_environment` for what it does and does not move)."""
        path = self.skewed.get(node) or self.root / f"faketime-{node}"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(f"{secs:+}s\n")
        tmp.replace(path)
        self.skewed[node] = path


def tools_missing() -> str | None:
    """Why the harness cannot run here (beyond namespaces: see netns.unavailable)."""
    for tool in ("ip", "tc", "ss", "java"):
        if shutil.which(tool) is None:
            return f"{tool} not found"
    return None
