"""Whose topologies serve a DRPC function, and how many calls a user holds, on a real secure
dev cluster: users added with ``squall secrets user add`` after it started (the DRPC server
knows them from nimbus, no keyring copied), each submitting a topology that tags its
answers with its owner's name (topologies/tagged_drpc.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
import yaml

from squall.cli.devcluster import DevCluster
from squall.cluster.state import ClusterState
from squall.cluster.zookeeper import disconnect, start_client
from squall.config import DEFAULTS
from squall.drpc import DRPCClient, DRPCExecutionError
from squall.drpc.invocations import HttpEndpoint
from squall.security.keyring import Keyring
from squall.testing import poll_for
from tests.cluster.conftest import REPO, TOPOLOGIES

TAGGED = str(TOPOLOGIES / "tagged_drpc.py")
TIMEOUT = 10  # drpc.request.timeout.secs: what a held call waits before its 504

pytestmark = pytest.mark.timeout(120)


class User:
    """A user added to a running cluster, as its admin would: a keyring of their own and a
    squall.yaml naming it."""

    def __init__(self, cluster: DevCluster, name: str) -> None:
        self.name = name
        self.cluster = cluster
        keyring = cluster.root / f"{name}-keyring.json"
        run([sys.executable, "-m", "squall.cli", "secrets", "user", "add", name,
             "--keyring", str(cluster.keyring_file), "--out", str(keyring)])
        self.conf = {**cluster.conf, "squall.keyring.path": str(keyring)}
        self.config_file = cluster.root / f"{name}.yaml"
        self.config_file.write_text(yaml.safe_dump(self.conf))
        self.config_file.chmod(0o600)

    def submit(self, topology: str, name: str) -> None:
        run([sys.executable, "-m", "squall.cli", "submit", "--config", str(self.config_file), TAGGED,
             "--topology", topology, "--name", name, "--conf", f"squall.test.tag={self.name}"])

    def call(self, function: str, args: str) -> str:
        with DRPCClient(self.conf) as client:
            return client.execute(function, args)

    def answers(self, function: str, args: str) -> str | None:
        """The answer, or None while no topology answers in time (the workers starting)."""
        try:
            return self.call(function, args)
        except DRPCExecutionError as e:
            if e.type != "SERVER_TIMEOUT":
                raise
            return None


def run(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO, check=False)
    assert proc.returncode == 0, f"{' '.join(cmd)}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def errors_of(cluster: DevCluster, topology: str) -> str:
    return json.dumps(cluster.api("GET", f"topologies/{topology}").get("errors") or [])


def drpc_token(cluster: DevCluster, topology: str) -> str:
    """The topology's DRPC credential, as its workers hold it (read where nimbus keeps it)."""
    topology_id = cluster.api("GET", f"topologies/{topology}")["id"]
    conf = {**DEFAULTS, **cluster.conf}
    client = start_client(conf)
    try:
        secrets = ClusterState(client, conf["storm.zookeeper.root"]).topology_secrets(topology_id)
    finally:
        disconnect(client)
    assert secrets is not None
    return str(secrets["drpc"]["token"])


def endpoint(cluster: DevCluster, token: str) -> HttpEndpoint:
    ca = Keyring.load(cluster.keyring_file).ca_pem
    return HttpEndpoint("127.0.0.1", cluster.drpc_port, token, ca)


def test_only_the_topologies_of_the_user_who_first_served_a_function_fetch_and_answer_it(
        make_cluster: Any) -> None:
    # Given a secure cluster, and alice and bob added after it started
    cluster = make_cluster(supervisors=1, slots=3, conf={"drpc.request.timeout.secs": TIMEOUT})
    alice, bob = User(cluster, "alice"), User(cluster, "bob")

    # When alice's topology serves "owned" first, then bob's serves it too
    alice.submit("Owned", "owned-alice")
    poll_for(lambda: alice.answers("owned", "ready") == "alice:ready", timeout=60,
             message="alice's topology answering")
    bob.submit("Owned", "owned-bob")
    poll_for(lambda: "belongs to user 'alice'" in errors_of(cluster, "owned-bob"), timeout=60,
             message="bob's topology told it may not fetch alice's function")

    # Then every call gets alice's answer, whoever calls
    assert [alice.call("owned", str(i)) for i in range(10)] == [f"alice:{i}" for i in range(10)]
    assert bob.call("owned", "mine?") == "alice:mine?"

    # and bob's topology's own credential, used directly, may neither fetch nor answer
    bobs, alices = endpoint(cluster, drpc_token(cluster, "owned-bob")), \
        endpoint(cluster, drpc_token(cluster, "owned-alice"))
    try:
        with pytest.raises(DRPCExecutionError) as raised:
            bobs.fetch_request("owned", 0)
        assert raised.value.status == 403
        # a request alice's credential fetched ("direct" is alice's: her credential fetched it first)
        assert alices.fetch_request("direct", 0) is None
        answer: list[str] = []
        caller = threading.Thread(target=lambda: answer.append(alice.call("direct", "hi")))
        caller.start()
        request = poll_for(lambda: alices.fetch_request("direct", 1), timeout=20, message="the call fetched")
        for attempt in (lambda: bobs.result(request.request_id, "bob's"),
                        lambda: bobs.fail_request(request.request_id, "bob says no")):
            with pytest.raises(DRPCExecutionError) as raised:
                attempt()
            assert raised.value.status == 403
        alices.result(request.request_id, "alice's")
        caller.join(20)
        assert answer == ["alice's"]
    finally:
        bobs.close()
        alices.close()


def test_the_acls_invocation_user_serves_a_function_and_a_users_calls_are_capped(make_cluster: Any) -> None:
    # Given "handed" handed to bob by drpc.authorizer.acl, and at most 3 calls waiting per user
    cluster = make_cluster(supervisors=1, slots=3, conf={
        "drpc.request.timeout.secs": TIMEOUT, "drpc.max.pending.per.user": 3,
        "drpc.authorizer.acl": {"handed": {"invocation.user": "bob", "client.users": ["alice", "bob"]}}})
    alice, bob = User(cluster, "alice"), User(cluster, "bob")

    # When alice's topology tries to serve it first, then bob's
    alice.submit("Handed", "handed-alice")
    poll_for(lambda: "invocation.user" in errors_of(cluster, "handed-alice"), timeout=60,
             message="alice's topology refused")
    bob.submit("Handed", "handed-bob")
    poll_for(lambda: bob.answers("handed", "ready") == "bob:ready", timeout=60,
             message="bob's topology answering")
    # Then bob's topology answers everyone
    assert [alice.call("handed", str(i)) for i in range(5)] == [f"bob:{i}" for i in range(5)]

    # When alice makes 4 calls at once to a function nobody serves
    outcomes: list[tuple[float, int | None]] = []
    lock = threading.Lock()

    def hold() -> None:
        started = time.monotonic()
        try:
            alice.call("nobody", "x")
            status = 200
        except DRPCExecutionError as e:
            status = e.status
        with lock:
            outcomes.append((time.monotonic() - started, status))

    callers = [threading.Thread(target=hold) for _ in range(4)]
    for caller in callers:
        caller.start()
    # Then the one past the cap is refused at once
    took, _status = poll_for(lambda: next((o for o in outcomes if o[1] == 429), None), timeout=TIMEOUT,
                            message="a 429")
    assert took < 2
    # and, while alice's three wait, bob is served
    started = time.monotonic()
    assert bob.call("handed", "still") == "bob:still"
    assert time.monotonic() - started < 2
    assert len(outcomes) == 1  # alice's three still held
    for caller in callers:
        caller.join(TIMEOUT + 30)
    assert sorted(status for _took, status in outcomes) == [429, 504, 504, 504]
