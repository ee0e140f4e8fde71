"""Network namespaces on one machine, joined by a bridge with no uplink: the
partition tests' network (issue 33).  Needs root and ``ip``/``tc`` (iproute2).

One run makes, all named after its run id ``<pid hex>x<n>`` so that teardown
removes exactly what it made:

* a bridge ``sq<run>br`` in the root namespace, up, with no address (IPv6 off
  on it, its ports and in the nodes, so not even a link-local one): the root
  namespace has no route to the nodes and forwards nothing of theirs, so no
  packet leaves the bridge (there is no uplink to leave by);
* per node a namespace ``sq<run>-<node>`` holding ``lo`` (up) and ``eth0``, the
  far end of a veth pair whose near end ``sq<run>v<i>`` is a port of the bridge;
  eth0 has ``10.77.<k>.<10+i>/24`` and no default route.

``k`` is the lowest subnet no live run holds.  Runs could share one (their
bridges and namespaces are apart), but distinct subnets keep a log line from
naming another run's address.  A start removes what dead runs left (their
owner's pid gone, or taken by a younger process): namespaces, bridges, veths,
after SIGKILLing what still runs in those namespaces.

Faults, each undone by its opposite (see :class:`Network`): partitions are
blackhole routes, one per blocked (source, destination) pair, inside the
source's namespace.  Not iptables (not on this machine), and simpler than tc
filters, which would have to share the root qdisc with the link's shaping: a
route leaves the qdisc to :meth:`Network.shape` alone.  A blackholed destination is silent for what is
established (packets vanish, as on a cut cable: TCP retransmits into nothing,
ZooKeeper sessions time out) while a new connection from the blocked side
fails at once (EINVAL) and one toward it hangs until its timeout.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import ctypes
import fcntl
import itertools
import json
import os
import re
import signal
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import psutil

T = TypeVar("T")

RECORDS = Path("/run/squall-netns")  # <run>.json: the owner (pid, start time) and its subnet
PREFIX = "sq"
CMD_TIMEOUT = 10.0
CLONE_NEWNET = 0x40000000
_RUN_NAME = re.compile(rf"^{PREFIX}([0-9a-f]+x\d+)(?:br|v\d+|-.+)$")
_counter = itertools.count()


class NetnsError(RuntimeError):
    """An ``ip``/``tc`` command failed, or namespaces are not permitted here."""


def run(*cmd: str, check: bool = True, stdin: str | None = None) -> str:
    """One ``ip``/``tc`` command, bounded; its stdout, or NetnsError with its stderr."""
    try:
        proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=CMD_TIMEOUT,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        msg = f"{' '.join(cmd)}: {e}"
        raise NetnsError(msg) from e
    if check and proc.returncode != 0:
        msg = f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}"
        raise NetnsError(msg)
    return proc.stdout


def unavailable() -> str | None:
    """Why network namespaces cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "needs root (ip netns)"
    name = f"{PREFIX}probe{os.getpid():x}"
    try:
        run("ip", "netns", "add", name)
    except NetnsError as e:
        return f"ip netns is not permitted here: {e}"
    run("ip", "netns", "del", name, check=False)
    return None


def blocked_pairs(groups: Iterable[Iterable[str]], nodes: Iterable[str]) -> set[tuple[str, str]]:
    """The (source, destination) pairs a partition into ``groups`` blocks: every pair
    of nodes in different groups, both ways.  Nodes no group names form one more group.
    Pure: the partition's meaning, apart from how it is made."""
    known = list(nodes)
    named = [set(g) for g in groups]
    seen: set[str] = set()
    for group in named:
        unknown = group - set(known)
        if unknown:
            msg = f"partition names unknown nodes {sorted(unknown)} (nodes: {known})"
            raise ValueError(msg)
        if group & seen:
            msg = f"partition names {sorted(group & seen)} in two groups"
            raise ValueError(msg)
        seen |= group
    rest = set(known) - seen
    if rest:
        named.append(rest)
    side = {node: i for i, group in enumerate(named) for node in group}
    return {(a, b) for a in known for b in known if side[a] != side[b]}


def _owner_alive(record: dict[str, Any]) -> bool:
    try:
        proc = psutil.Process(int(record["pid"]))
        return abs(proc.create_time() - float(record["create_time"])) < 1.0
    except (psutil.Error, KeyError, TypeError, ValueError):
        return False


def _pid_alive(run_id: str) -> bool:
    return psutil.pid_exists(int(run_id.split("x")[0], 16))


def _live_records() -> dict[str, dict[str, Any]]:
    out = {}
    for path in RECORDS.glob("*.json"):
        try:
            out[path.stem] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    return out


def _kill_namespace_processes(ns: str) -> None:
    for pid in run("ip", "netns", "pids", ns, check=False).split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


def remove_dead_runs() -> list[str]:
    """Remove what runs whose owner is gone left behind; the run ids removed."""
    records = _live_records()
    names = run("ip", "netns", "list", check=False).split()
    links = [line.split(":")[1].strip().split("@")[0]
             for line in run("ip", "-o", "link", "show", check=False).splitlines() if ":" in line]
    found: dict[str, list[tuple[str, str]]] = {}
    for kind, name in [*(("ns", n) for n in names), *(("link", n) for n in links)]:
        match = _RUN_NAME.match(name)
        if match:
            found.setdefault(match.group(1), []).append((kind, name))
    dead = []
    for run_id, items in found.items():
        record = records.get(run_id)
        if (record is not None and _owner_alive(record)) or (record is None and _pid_alive(run_id)):
            continue
        for kind, name in sorted(items, key=lambda item: item[0] != "ns"):  # namespaces first
            if kind == "ns":
                _kill_namespace_processes(name)
                run("ip", "netns", "del", name, check=False)
            else:
                run("ip", "link", "del", name, check=False)
        dead.append(run_id)
    for run_id, record in records.items():
        if not _owner_alive(record):
            (RECORDS / f"{run_id}.json").unlink(missing_ok=True)
    return dead


def _no_ipv6(device: str) -> None:
    """No IPv6 address (not even link-local) on a root-namespace device of ours."""
    path = Path(f"/proc/sys/net/ipv6/conf/{device}/disable_ipv6")
    if path.exists():
        path.write_text("1\n")


class NamespaceThreads:
    """Threads that live in a node's namespace, so that this process can be that node's
    client (HTTP, ZooKeeper, sockets of its own) without a process per call.  A thread's
    network namespace is its own (setns(2)); sockets it opens, threads it starts and
    processes it forks belong there."""

    def __init__(self, ns: str, workers: int = 4) -> None:
        self.ns = ns
        self._pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix=f"netns-{ns}",
                                                           initializer=self._enter)

    def _enter(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/run/netns/{self.ns}", os.O_RDONLY | os.O_CLOEXEC)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"setns into {self.ns}: {os.strerror(err)}")
        finally:
            os.close(fd)

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return self._pool.submit(fn, *args, **kwargs).result()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


class Network:
    """A run's bridge and namespaces; :meth:`create` builds it, :meth:`close` removes it
    (also at exit, and a later start removes it if this process died first)."""

    def __init__(self, nodes: Iterable[str]) -> None:
        self.nodes = list(dict.fromkeys(nodes))
        if not self.nodes or len(self.nodes) > 200:
            msg = f"a network needs 1 to 200 nodes, not {len(self.nodes)}"
            raise ValueError(msg)
        self.run_id = f"{os.getpid():x}x{next(_counter)}"
        self.bridge = f"{PREFIX}{self.run_id}br"
        self.subnet = 0
        self.blocked: set[tuple[str, str]] = set()
        self.shaped: dict[str, str] = {}  # node -> how its link is shaped
        self._lock = threading.Lock()
        self._made = False
        self._threads: dict[str, NamespaceThreads] = {}

    def ns(self, node: str) -> str:
        if node not in self.nodes:
            msg = f"no node {node!r} (nodes: {self.nodes})"
            raise KeyError(msg)
        return f"{PREFIX}{self.run_id}-{node}"

    def veth(self, node: str) -> str:
        """The root side of ``node``'s veth pair (its far side is eth0 in the node)."""
        return f"{PREFIX}{self.run_id}v{self.nodes.index(node)}"

    def address(self, node: str) -> str:
        return f"10.77.{self.subnet}.{10 + self.nodes.index(node)}"

    def node_of(self, address: str) -> str:
        return next(n for n in self.nodes if self.address(n) == address)

    # -- making and removing it ---------------------------------------------------

    def __enter__(self) -> Network:
        self.create()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def create(self) -> None:
        RECORDS.mkdir(parents=True, exist_ok=True)
        with open(RECORDS / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one run picks a subnet at a time
            remove_dead_runs()
            taken = {r.get("subnet") for r in _live_records().values()}
            self.subnet = next(k for k in range(1, 255) if k not in taken)
            me = psutil.Process()
            (RECORDS / f"{self.run_id}.json").write_text(json.dumps(
                {"pid": me.pid, "create_time": me.create_time(), "subnet": self.subnet}))
        self._made = True
        atexit.register(self.close)
        try:
            run("ip", "link", "add", self.bridge, "type", "bridge")
            _no_ipv6(self.bridge)
            run("ip", "link", "set", self.bridge, "up")
            for node in self.nodes:
                ns = self.ns(node)
                run("ip", "netns", "add", ns)
                # IPv4 only: no link-local IPv6 by which nodes (or the root namespace) would
                # reach each other past the blackhole routes.
                run("ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1")
                run("ip", "link", "add", self.veth(node), "type", "veth", "peer", "name", "eth0", "netns", ns)
                _no_ipv6(self.veth(node))
                run("ip", "link", "set", self.veth(node), "master", self.bridge, "up")
                run("ip", "-n", ns, "link", "set", "lo", "up")
                run("ip", "-n", ns, "addr", "add", f"{self.address(node)}/24", "dev", "eth0")
                run("ip", "-n", ns, "link", "set", "eth0", "up")
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Remove the namespaces (SIGKILLing what still runs in them), the veths and
        the bridge; idempotent, each command bounded."""
        with self._lock:
            if not self._made:
                return
            self._made = False
        atexit.unregister(self.close)
        for threads in self._threads.values():
            threads.close()
        self._threads.clear()
        for node in self.nodes:
            ns = self.ns(node)
            _kill_namespace_processes(ns)
            run("ip", "netns", "del", ns, check=False)
            run("ip", "link", "del", self.veth(node), check=False)  # gone with its peer, normally
        run("ip", "link", "del", self.bridge, check=False)
        (RECORDS / f"{self.run_id}.json").unlink(missing_ok=True)

    def exec_prefix(self, node: str) -> list[str]:
        """A command run behind this runs in ``node`` (``ip netns exec`` execs it: same pid)."""
        return ["ip", "netns", "exec", self.ns(node)]

    def pids(self, node: str) -> list[int]:
        """Every process whose network namespace is ``node``'s."""
        return [int(p) for p in run("ip", "netns", "pids", self.ns(node), check=False).split()]

    def threads(self, node: str) -> NamespaceThreads:
        """This process's threads in ``node`` (made on first use, closed with the network)."""
        with self._lock:
            if node not in self._threads:
                self._threads[node] = NamespaceThreads(self.ns(node))
            return self._threads[node]

    def listening(self, node: str) -> list[tuple[str, int]]:
        """(address, port) of every TCP socket listening in ``node``."""
        out = []
        for line in run("ip", "netns", "exec", self.ns(node), "ss", "-ltnH").splitlines():
            local = line.split()[3]
            host, _, port = local.rpartition(":")
            out.append((host.strip("[]"), int(port)))
        return out

    # -- faults -------------------------------------------------------------------

    def _routes(self, pairs: Iterable[tuple[str, str]], verb: str) -> None:
        by_source: dict[str, list[str]] = {}
        for source, dest in pairs:
            by_source.setdefault(source, []).append(f"route {verb} blackhole {self.address(dest)}/32\n")
        for source, lines in by_source.items():
            run("ip", "-n", self.ns(source), "-force", "-batch", "-", stdin="".join(lines))

    def block(self, pairs: Iterable[tuple[str, str]]) -> None:
        """Block each (source, destination) pair; one-way unless the reverse is given too."""
        new = {tuple(p) for p in pairs} - self.blocked
        for source, dest in new:
            self.ns(source), self.ns(dest)  # unknown names fail before anything changes
        self._routes(new, "add")
        self.blocked |= new  # type: ignore[arg-type]

    def partition(self, *groups: Iterable[str]) -> None:
        """The network split into ``groups`` (nodes no group names form one more): nodes of
        different groups reach nothing of each other.  Replaces any earlier partition."""
        pairs = blocked_pairs(groups, self.nodes)
        self.heal()
        self.block(pairs)

    def isolate(self, node: str) -> None:
        self.partition({node})

    def cut(self, a: str, b: str, one_way: bool = False) -> None:
        """``a`` no longer reaches ``b`` (and, unless ``one_way``, ``b`` not ``a``); adds to
        what is already blocked."""
        self.block([(a, b)] if one_way else [(a, b), (b, a)])

    def heal(self) -> None:
        """Every blocked pair open again (shaped links stay so)."""
        self._routes(self.blocked, "del")
        self.blocked.clear()

    def shape(self, node: str, rate_kbit: int = 0, loss_pct: float = 0) -> None:
        """``node``'s link slow (``rate_kbit``: a link of that bandwidth, its queue up to a
        hundred packets, so latency grows with load as on a congested uplink) and/or lossy
        (``loss_pct`` of packets, drawn at random), both ways.  Made with what kernels without
        netem (this one) have: an HTB class at the rate, and a classic-BPF filter reading the kernel's random
        number sends a packet to a class that drains a byte a second through a one-packet
        queue (dropped, or let through seconds late: reordered)."""
        if rate_kbit < 0 or not 0 <= loss_pct <= 100:
            msg = f"shape rate_kbit={rate_kbit} loss_pct={loss_pct} is out of range"
            raise ValueError(msg)
        self.unshape(node)
        rate = f"{rate_kbit}kbit" if rate_kbit else "10gbit"
        threshold = int((1 << 32) * (1 - loss_pct / 100))
        # ld [random]; jge #threshold -> ret -1 (match: the dropping class), else ret 0
        program = f"4,32 0 0 {(1 << 32) - 4096 + 56},53 0 1 {threshold},6 0 0 4294967295,6 0 0 0"
        for prefix, dev in ((["-n", self.ns(node)], "eth0"), ([], self.veth(node))):
            tc = ["tc", *prefix]
            run(*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10")
            run(*tc, "class", "add", "dev", dev, "parent", "1:", "classid", "1:10", "htb", "rate", rate,
                "ceil", rate)
            limit = "100" if rate_kbit else "1000"
            run(*tc, "qdisc", "add", "dev", dev, "parent", "1:10", "pfifo", "limit", limit)
            if loss_pct:
                run(*tc, "class", "add", "dev", dev, "parent", "1:", "classid", "1:20", "htb", "rate", "8bit",
                    "ceil", "8bit")
                run(*tc, "qdisc", "add", "dev", dev, "parent", "1:20", "pfifo", "limit", "1")
                run(*tc, "filter", "add", "dev", dev, "parent", "1:", "prio", "1", "bpf", "bytecode", program,
                    "classid", "1:20")
        self.shaped[node] = f"rate {rate}" + (f" loss {loss_pct}%" if loss_pct else "")

    def unshape(self, node: str | None = None) -> None:
        """``node``'s link (None: every shaped link) as :meth:`shape` found it."""
        for name in [node] if node is not None else list(self.shaped):
            run("tc", "-n", self.ns(name), "qdisc", "del", "dev", "eth0", "root", check=False)
            run("tc", "qdisc", "del", "dev", self.veth(name), "root", check=False)
            self.shaped.pop(name, None)

    def signal(self, node: str, sig: int) -> list[int]:
        """``sig`` to every process of ``node``; the pids signalled."""
        pids = self.pids(node)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        return pids


@contextlib.contextmanager
def network(nodes: Iterable[str]) -> Iterator[Network]:
    with Network(nodes) as net:
        yield net
