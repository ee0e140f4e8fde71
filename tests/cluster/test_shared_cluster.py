"""Issue 47: a user allowed to submit reaches nothing outside their own topologies.
Each finding of the audit, against a real secure dev cluster started as root (as CI
runs), whose workers run as their topology's own Unix user in bubblewrap:

* the launcher: a topology's PATH and loader variables never act where the
  supervisor starts a worker as root;
* names: a definition's name that is a path never becomes one;
* ZooKeeper: a topology's conf cannot pick the nodes nimbus grants its identity,
  and one team's transactional id or checkpointed state is never another's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from squall.cli.devcluster import DevCluster
from squall.runtime import sandbox
from squall.security.keyring import Keyring
from squall.testing import poll_for
from tests.cluster.conftest import REPO, TOPOLOGIES, squall_cli

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or sandbox.unavailable(sandbox.Identity(61184, 61184)) is not None,
    reason="needs root and bubblewrap (CI has both: ops/bootstrap.sh)")


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("shared")
    path.chmod(0o777)  # the workers run as users of their own
    return path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, shared: Path) -> Iterator[DevCluster]:
    root = tmp_path_factory.mktemp("teams") / "c"
    c = DevCluster(root, supervisors=1, slots=4,
                   conf={"supervisor.worker.shared.dirs": [str(shared)],
                         "supervisor.worker.restart.backoff.initial.secs": 0.2})
    try:
        c.start()
        for name in ("alice", "bob"):
            c.add_user(name)
        yield c
    finally:
        c.stop()


def submit(cluster: DevCluster, user: str, path: Path, name: str,
           *conf: str) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "squall.cli", "submit", "--config", str(cluster.root / f"{user}.yaml"),
            str(path), "--name", name, *(c for kv in conf for c in ("--conf", kv))]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=REPO, check=False)


def kill(cluster: DevCluster, name: str) -> None:
    squall_cli(cluster, "kill", name, "-w", "0")


def zookeeper(cluster: DevCluster) -> KazooClient:
    keyring = Keyring.load(cluster.keyring_file)
    user, password = keyring.zookeeper_credentials()[0]
    zk = KazooClient(hosts=f"127.0.0.1:{cluster.conf['storm.zookeeper.port']}",
                     auth_data=[("digest", f"{user}:{password}")])
    zk.start(timeout=15)
    return zk


def test_a_topologys_path_and_loader_variables_never_reach_the_root_launcher(cluster: DevCluster,
                                                                            shared: Path) -> None:
    # Given a topology whose environment asks for LD_PRELOAD: refused at submit, naming it
    refused = submit(cluster, "alice", TOPOLOGIES / "planter.py", "preload",
                     f"squall.test.dir={shared}",
                     'topology.environment={"LD_PRELOAD": "/tmp/evil.so"}')
    assert refused.returncode != 0
    assert "LD_PRELOAD" in refused.stderr + refused.stdout
    # When a topology puts a directory it writes first on its PATH, plants a bwrap and a
    # setpriv there and kills its own worker, so that the supervisor launches it again
    env = json.dumps({"PATH": f"{shared}:/usr/bin:/bin", "MY_SETTING": "on"})
    done = submit(cluster, "alice", TOPOLOGIES / "planter.py", "planter", f"squall.test.dir={shared}",
                  f"topology.environment={env}")
    assert done.returncode == 0, done.stderr
    report = json.loads(poll_for(lambda: (shared / "relaunched.json").exists()
                                 and (shared / "relaunched.json").read_text(), timeout=90,
                                 message="the relaunched worker's report"))
    # Then the relaunch ran the real tools: nothing planted ran, as root or at all
    assert (shared / "planted").exists()
    assert not list(shared.glob("ran-*")), {p.name: p.read_text() for p in shared.glob("ran-*")}
    # and the worker, as a user of its own, still got the environment its topology set
    assert report["uid"] not in (0, os.getuid())
    assert report["PATH"] == f"{shared}:/usr/bin:/bin" and report["MY_SETTING"] == "on"
    kill(cluster, "planter")


def test_a_definition_name_that_is_a_path_is_refused(cluster: DevCluster) -> None:
    from tests.cluster.topologies.planter import PlanterTopology

    alice = Keyring.load(cluster.root / "alice.keyring.json").client_token
    for bad in ("../../../etc", "..", "a/b"):
        definition = {**PlanterTopology.definition().to_dict(), "name": bad}
        body = json.dumps({"name": "pathname", "topology": definition, "conf": {}}).encode()
        answer = cluster.request("POST", "/api/v1/topologies", body, token=alice)
        assert answer.status_code == 400, answer.text
        assert "definition's name" in answer.json()["error"]
    assert not (cluster.supervisor_dir(0) / "state" / "etc").exists()


def test_a_topologys_conf_never_picks_the_zookeeper_nodes_its_identity_is_granted(
        cluster: DevCluster, shared: Path) -> None:
    zk = zookeeper(cluster)
    try:
        before = zk.get_acls("/squall/secrets")[0]
        # Given the audit's submit: the cluster's own tree as the transactional root
        answer = submit(cluster, "alice", TOPOLOGIES / "transactional_wordcount.py", "txa",
                        f"squall.test.dir={shared}", "transactional.zookeeper.root=/squall",
                        "topology.transactional.id=secrets")
        # Then it is refused, naming the key, and nothing of the cluster's changed hands
        assert answer.returncode != 0
        assert "transactional.zookeeper.root" in answer.stderr + answer.stdout
        # When the id alone names the cluster's folder, it is a folder of the transactional root
        answer = submit(cluster, "alice", TOPOLOGIES / "transactional_wordcount.py", "txa",
                        f"squall.test.dir={shared}", "topology.transactional.id=secrets")
        assert answer.returncode == 0, answer.stderr
        assert zk.get_acls("/squall/secrets")[0] == before
        assert all(not a.id.id.startswith("topology-") for a in before)
        granted = zk.get_acls("/transactional/secrets")[0]
        assert any(a.id.id.startswith("topology-txa-") for a in granted)
        # and another team naming the same transactional id is refused: the state is alice's
        answer = submit(cluster, "bob", TOPOLOGIES / "transactional_wordcount.py", "txb",
                        f"squall.test.dir={shared}", "topology.transactional.id=secrets")
        assert answer.returncode != 0
        assert "belong to another user" in answer.stderr + answer.stdout
        assert zk.get_acls("/transactional/secrets")[0] == granted
        # while alice, resubmitting under another name, resumes her own
        kill(cluster, "txa")
        poll_for(lambda: "txa" not in {t["name"] for t in cluster.api("GET", "topologies")}, timeout=60,
                 message="txa gone")
        answer = submit(cluster, "alice", TOPOLOGIES / "transactional_wordcount.py", "txa2",
                        f"squall.test.dir={shared}", "topology.transactional.id=secrets")
        assert answer.returncode == 0, answer.stderr
        kill(cluster, "txa2")
    finally:
        zk.stop()
        zk.close()


def test_another_teams_class_name_does_not_take_their_state(cluster: DevCluster, shared: Path) -> None:
    # Given alice's transactional topology, whose id defaults to the name it runs under
    answer = submit(cluster, "alice", TOPOLOGIES / "transactional_wordcount.py", "counts",
                    f"squall.test.dir={shared}")
    assert answer.returncode == 0, answer.stderr
    kill(cluster, "counts")
    poll_for(lambda: "counts" not in {t["name"] for t in cluster.api("GET", "topologies")}, timeout=60,
             message="counts gone")
    # When bob submits the same class under the same name once hers is gone
    answer = submit(cluster, "bob", TOPOLOGIES / "transactional_wordcount.py", "counts",
                    f"squall.test.dir={shared}")
    # Then he is refused: he would resume her transactions
    assert answer.returncode != 0
    assert "'counts' (of alice)" in answer.stderr + answer.stdout
    # and a topology of his with no state may use any name at all
    answer = submit(cluster, "bob", TOPOLOGIES / "planter.py", "counts-plain",
                    f"squall.test.dir={shared}")
    assert answer.returncode == 0, answer.stderr
    kill(cluster, "counts-plain")
