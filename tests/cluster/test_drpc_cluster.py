"""DRPC on a real, secure dev cluster: its DRPC server (TLS, the keyring's tokens), a linear
DRPC topology whose spouts fetch with their topology's own credential, answering
``squall drpc-client`` and DRPCClient; a caller without a token refused, a failed and a
timed-out request surfaced as DRPCExecutionError."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from squall.drpc import DRPCClient, DRPCExecutionError
from squall.security import tls
from squall.security.keyring import Keyring
from squall.testing import poll_for
from tests.cluster.conftest import TOPOLOGIES, squall_cli

TOPOLOGY = str(TOPOLOGIES / "exclamation_drpc.py")
TIMEOUT = 4  # drpc.request.timeout.secs: short, for the timed-out request

pytestmark = pytest.mark.timeout(240)


def answered(client: DRPCClient) -> bool:
    try:
        return client.execute("exclamation", "ready") == "ready!"
    except DRPCExecutionError:  # timed out: the workers are not up yet
        return False


def test_a_drpc_topology_answers_clients_over_tls_with_tokens(make_cluster: Any) -> None:
    # Given a secure cluster with its DRPC server, and the exclamation topology submitted
    cluster = make_cluster(supervisors=1, slots=4, conf={"drpc.request.timeout.secs": TIMEOUT})
    squall_cli(cluster, "submit", TOPOLOGY, "--name", "exclaim", "--conf", "topology.workers=2")
    with DRPCClient(cluster.conf) as client:
        assert client.scheme == "https"
        poll_for(lambda: answered(client), timeout=90, message="the topology answering")

        # When a client calls it: the answer, within milliseconds once warm
        took = []
        for i in range(20):
            started = time.perf_counter()
            assert client.execute("exclamation", f"hello {i}") == f"hello {i}!"
            took.append(time.perf_counter() - started)
        assert sorted(took)[10] < 0.5

        # A request the topology fails reaches the client as a failure, not a timeout
        started = time.monotonic()
        with pytest.raises(DRPCExecutionError) as raised:
            client.execute("exclamation", "fail")
        assert raised.value.type == "FAILED_REQUEST" and raised.value.status == 400
        assert time.monotonic() - started < TIMEOUT

        # and one nobody serves times out after drpc.request.timeout.secs, saying so
        with pytest.raises(DRPCExecutionError) as raised:
            client.execute("nobody-serves-this", "x")
        assert raised.value.type == "SERVER_TIMEOUT" and raised.value.status == 504
        assert f"timed out after {TIMEOUT} s" in str(raised.value)

    # The command line, Storm's: pairs of function and args, or -f and args
    out = squall_cli(cluster, "drpc-client", "exclamation", "a", "exclamation", "b").stdout
    assert out.splitlines() == ['exclamation "a" => "a!"', 'exclamation "b" => "b!"']
    out = squall_cli(cluster, "drpc-client", "-f", "exclamation", "x", "y z").stdout
    assert out.splitlines() == ['exclamation "x" => "x!"', 'exclamation "y z" => "y z!"']
    failed = squall_cli(cluster, "drpc-client", "exclamation", "fail", check=False)
    assert failed.returncode == 1 and "the topology failed the request" in failed.stderr
    # A misspelt function: --timeout bounds the wait, and the error says what to check
    missing = squall_cli(cluster, "drpc-client", "--timeout", "1", "Exclamation", "x", check=False)
    assert missing.returncode == 1 and "within 1 s for 'Exclamation'" in missing.stderr
    assert "case-sensitive" in missing.stderr

    # A caller without a token, or with one of no user, is refused over TLS
    context = tls.client_context(ca_pem=Keyring.load(cluster.keyring_file).ca_pem)
    with httpx.Client(verify=context, trust_env=False, timeout=10) as plain:
        url = f"{cluster.drpc_url}/drpc/exclamation/sneaky"
        assert plain.get(url).status_code == 401
        assert plain.get(url, headers={"Authorization": "Bearer sq_nobody"}).status_code == 401
        # nor may a user fetch the topology's requests
        admin = Keyring.load(cluster.keyring_file).client_token
        response = plain.post(f"{cluster.drpc_url}/invocations/fetchRequest/exclamation",
                              headers={"Authorization": f"Bearer {admin}"})
        assert response.status_code == 403

    # Trident's DRPC streams on the same cluster (issue 31): Storm's TridentReach answers its
    # known reaches, and the Trident word count's counts grow as its batches commit
    squall_cli(cluster, "kill", "exclaim", "-w", "0")
    examples = TOPOLOGIES.parents[2] / "examples" / "trident"
    squall_cli(cluster, "submit", str(examples / "reach.py"), "--name", "reach")
    squall_cli(cluster, "submit", str(examples / "wordcount.py"), "--name", "wordcount")
    with DRPCClient(cluster.conf) as client:
        poll_for(lambda: trident_answer(client, "reach", "foo.com/blog/1") == [[16]], timeout=90,
                 message="TridentReach answering")
        assert trident_answer(client, "reach", "engineering.twitter.com/blog/5") == [[14]]
        assert trident_answer(client, "reach", "aaa") == [[0]]
        first = poll_for(lambda: (trident_answer(client, "words", "the cow") or [[0]])[0][0], timeout=90,
                         message="words counted")
        poll_for(lambda: (trident_answer(client, "words", "the cow") or [[0]])[0][0] > first, timeout=60,
                 message="the counts growing")
    out = squall_cli(cluster, "drpc-client", "reach", "tech.backtype.com/blog/123").stdout
    # tim: alex; mike: john, bob; john: alice, nathan, jim, mike, bob
    assert out.strip() == 'reach "tech.backtype.com/blog/123" => "[[7]]"'

    # A state in a worker's memory, on two workers: its query runs in the worker that updates
    # it (topology.colocate.with), where the even scheduler alone would put it in the other one
    squall_cli(cluster, "submit", str(TOPOLOGIES / "trident_colocated.py"), "--name", "colocated",
               "--conf", "topology.workers=2")
    info = cluster.api("GET", "topologies/colocated")
    state, query = _state_and_query(info)
    port = {tuple(e): w["port"] for w in info["workers"] for e in w["executors"]}
    assert port[state] == port[query]
    with DRPCClient(cluster.conf) as client:
        poll_for(lambda: (trident_answer(client, "local_counts", "the cow") or [[0]])[0][0] > 0, timeout=90,
                 message="the query reading the counts of the worker keeping them")


def _state_and_query(info: dict[str, Any]) -> tuple[tuple[int, int], tuple[int, int]]:
    """The executors of a Trident topology's state and of its query, which the even scheduler
    on its own puts in different workers of two (so that the test shows colocation)."""
    from squall.nimbus.placement import colocations, spread
    from squall.topology.topology import definition_from_dict
    from squall.worker.plan import plan_topology

    plan = plan_topology(definition_from_dict(info["definition"]), overrides=info["conf"])
    (([state], [query]),) = colocations(plan)[0]
    apart = {e.id: i for i, execs in enumerate(spread(plan.executors, 2)) for e in execs}
    assert apart[state] != apart[query]
    return state, query


def trident_answer(client: DRPCClient, function: str, args: str) -> Any:
    import json

    try:
        return json.loads(client.execute(function, args))
    except DRPCExecutionError:  # timed out: the workers are not up yet
        return None
