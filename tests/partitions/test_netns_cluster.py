"""Issue 33's cluster: Squall's daemons on nodes of their own, network namespaces
joined by a bridge with no uplink, each daemon on its node's address.  A smoke test
kept short (CI is near its budget): the cluster comes up there, an at-least-once word
count runs over two supervisors, a partition stops its tuples crossing and healing it
lets them through again.  Runs where ``ip netns`` is permitted (CI runs as root)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from squall.testing import poll_for
from tests.cluster.conftest import TOPOLOGIES, WordCountRun, workers_running
from tests.partitions import netns
from tests.partitions.cluster import NetnsCluster, skew_environment, tools_missing

_why_not = tools_missing() or netns.unavailable()
needs_netns = pytest.mark.skipif(_why_not is not None, reason=f"network namespaces: {_why_not}")


def test_a_partition_is_every_pair_across_groups_both_ways() -> None:
    nodes = ["zk", "nimbus-a", "sup-1", "sup-2"]
    assert netns.blocked_pairs([{"sup-1"}], nodes) == {
        ("sup-1", n) for n in nodes if n != "sup-1"} | {(n, "sup-1") for n in nodes if n != "sup-1"}
    assert netns.blocked_pairs([{"zk", "sup-1"}, {"nimbus-a"}], nodes) >= {("sup-2", "nimbus-a"),
                                                                          ("zk", "sup-2")}
    with pytest.raises(ValueError, match="unknown nodes"):
        netns.blocked_pairs([{"sup-9"}], nodes)
    with pytest.raises(ValueError, match="in two groups"):
        netns.blocked_pairs([{"zk"}, {"zk", "sup-1"}], nodes)


@pytest.mark.skipif(not Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1").exists(),
                    reason="Debian's libfaketime is not installed (ops/bootstrap.sh --tests)")
def test_a_skewed_process_sees_the_wall_clock_moved_live_and_monotonic_time_real(tmp_path: Path) -> None:
    offset = tmp_path / "offset"
    offset.write_text("+3600s\n")
    probe = ("import time, pathlib, sys\n"
             "m = time.monotonic(); first = time.time()\n"
             "pathlib.Path(sys.argv[1]).write_text('-3600s\\n')\n"
             "while time.monotonic() - m < 5 and time.time() > first - 3000: pass\n"
             "print(first, time.time(), time.monotonic() - m)\n")
    out = subprocess.run([sys.executable, "-c", probe, str(offset)], env=skew_environment(offset),
                         capture_output=True, text=True, timeout=30, check=True).stdout.split()
    first, after, elapsed = (float(x) for x in out)
    assert abs(first - time.time() - 3600) < 60  # an hour ahead from the start
    assert abs(after - time.time() + 3600) < 60  # an hour behind once the file says so
    assert elapsed < 5  # the monotonic clock did not jump with it


def _crossed(run: WordCountRun, pids: set[int]) -> int:
    """Words counted by the workers ``pids``: each one reached them over the network."""
    return sum(len(p.read_text().splitlines()) for p in run.dir.glob("counted-*.log")
               if int(p.stem.rsplit("-", 1)[1]) in pids)


@needs_netns
@pytest.mark.timeout(90)
def test_a_cluster_in_namespaces_runs_and_a_partition_stops_and_heal_restarts_its_traffic(
        tmp_path: Path) -> None:
    run = WordCountRun(tmp_path / "wc", sentences=20_000)
    with NetnsCluster(tmp_path / "cluster", supervisors=2, nimbuses=1, drpc=False,
                      conf={"supervisor.run.worker.as.user": False}) as cluster:
        net = cluster.net
        # Given a word count whose two workers are on sup-1 and sup-2
        cluster.cli("submit", str(TOPOLOGIES / "durable_wordcount.py"), "--name", "wc",
                    "--conf", f"squall.test.dir={run.dir}", "--conf", "topology.workers=2",
                    "--conf", "squall.test.rate=300")
        workers = poll_for(lambda: len(cluster.worker_pids()) == 2 and cluster.worker_pids(), timeout=30,
                           message="two workers")
        assert {node for node, _port in workers} == {0, 1}
        spout = workers_running(cluster, "wc", lambda component: component == "sentences")
        far = set(workers.values()) - set(spout.values())
        poll_for(lambda: _crossed(run, far) > 100, timeout=30, message="words counted across the network")

        # Then every daemon and worker listens on its node's address only, nothing on
        # loopback or every interface, and no node has a route out of the bridge
        for node in net.nodes:
            listening = net.listening(node)
            assert all(host == net.address(node) for host, _port in listening), (node, listening)
            assert not netns.run("ip", "-n", net.ns(node), "route", "show", "default")
            assert "unreachable" in netns.run("ip", "-n", net.ns(node), "route", "get", "1.1.1.1",
                                              check=False) + _stderr(net.ns(node), "1.1.1.1")
        assert (net.address("zk"), cluster.conf["storm.zookeeper.port"]) in net.listening("zk")
        assert (net.address("nimbus-a"), cluster.nimbus_ports[0]) in net.listening("nimbus-a")
        for (i, port) in workers:
            assert (net.address(f"sup-{i + 1}"), port) in net.listening(f"sup-{i + 1}")
        assert "inet" not in netns.run("ip", "-o", "addr", "show", "dev", net.bridge)  # nor inet6
        assert "inet6" not in netns.run("ip", "-n", net.ns("sup-1"), "-o", "addr", "show")
        assert not netns.run("ip", "route", "show", "dev", net.bridge)

        # When sup-1 is cut from everyone else, no word crosses any more
        net.partition({"sup-1"})
        stable = _stable(lambda: _crossed(run, far), quiet=2.0, timeout=15)
        acked = len(run.acked())

        # And when the network heals, words cross and sentences complete again
        net.heal()
        poll_for(lambda: _crossed(run, far) > stable + 100, timeout=30, message="words crossing after heal")
        poll_for(lambda: len(run.acked()) > acked + 50, timeout=30, message="sentences acked after heal")
    assert not [n for n in netns.run("ip", "netns", "list").split() if n.startswith(f"sq{net.run_id}")]
    assert net.bridge not in netns.run("ip", "-o", "link", "show")


def _stderr(ns: str, address: str) -> str:
    return subprocess.run(["ip", "-n", ns, "route", "get", address], capture_output=True, text=True,
                          timeout=10, check=False).stderr


def _stable(measure: object, quiet: float, timeout: float) -> int:
    """Wait until ``measure()`` has not changed for ``quiet`` seconds; its value then."""
    assert callable(measure)
    deadline = time.monotonic() + timeout
    value, since = measure(), time.monotonic()
    while time.monotonic() - since < quiet:
        if time.monotonic() > deadline:
            msg = f"still changing after {timeout}s (at {value}): traffic crosses the partition"
            raise AssertionError(msg)
        time.sleep(0.05)
        now = measure()
        if now != value:
            value, since = now, time.monotonic()
    return int(value)
