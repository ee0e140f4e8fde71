"""The DRPC server (squall.drpc_server) in this process, over real HTTP: Storm's client form,
the topologies' long-polling invocations, timeouts and failures with Storm's statuses, and
in a secure cluster TLS, the keyring's users and the topologies' own credentials (their
hashes in a real ZooKeeper)."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from squall import config as config_mod
from squall.cluster.state import ClusterState
from squall.cluster.zookeeper import DevZookeeper, disconnect, start_client
from squall.drpc import DRPCClient, DRPCExecutionError
from squall.drpc.invocations import HttpEndpoint
from squall.drpc_server.daemon import DRPCServer
from squall.drpc_server.invokers import Invokers
from squall.runtime.ports import free_port
from squall.security import tls
from squall.security.keyring import Keyring
from squall.testing import poll_for

pytestmark = pytest.mark.timeout(120)


def token_of(topology_id: str) -> str:
    return f"sqd_{topology_id}.secret-of-{topology_id}"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Topology:
    """What a topology's spouts and ReturnResults do: fetch, answer ``function`` with ``answer``."""

    def __init__(self, endpoint: HttpEndpoint, function: str, answer: Any = lambda args: args + "!") -> None:
        self.endpoint = endpoint
        self.function = function
        self.answer = answer
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                request = self.endpoint.fetch_request(self.function, 0.5)
            except DRPCExecutionError:
                continue
            if request is None:
                continue
            if request.func_args == "fail":
                self.endpoint.fail_request(request.request_id, "the topology says no")
            else:
                self.endpoint.result(request.request_id, self.answer(request.func_args))

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(5)
        self.endpoint.close()


# -- insecure: the protocol -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def open_server() -> Iterator[DRPCServer]:
    conf = config_mod.merge({"squall.secure": False, "drpc.port": 0, "drpc.request.timeout.secs": 1.5,
                             "drpc.max_buffer_size": 1000})
    server = DRPCServer(conf)
    server.start()
    yield server
    server.stop()


def client_conf(server: DRPCServer, **extra: Any) -> dict[str, Any]:
    return {"squall.secure": False, "drpc.servers": ["127.0.0.1"], "drpc.port": server.port, **extra}


def test_a_waiting_topology_gets_a_call_at_once_and_the_client_its_answer(open_server: DRPCServer) -> None:
    topology = Topology(HttpEndpoint("127.0.0.1", open_server.port, None, None), "exclaim")
    try:
        with DRPCClient(client_conf(open_server)) as client:
            client.execute("exclaim", "warm")
            started = time.monotonic()
            for i in range(20):
                assert client.execute("exclaim", f"call {i}") == f"call {i}!"
            assert (time.monotonic() - started) / 20 < 0.25  # long polling: no poll interval to wait out
        # Storm's HTTP form: GET with the args in the path (percent-encoded, '/' kept), POST with a body
        base = f"http://127.0.0.1:{open_server.port}/drpc/exclaim"
        assert httpx.get(f"{base}/a%20b/c%2Fd").text == "a b/c/d!"
        assert httpx.get(base).text == "!"
        assert httpx.post(base, content="über".encode()).text == "über!"
    finally:
        topology.stop()


def test_a_call_nobody_answers_times_out_with_storms_504(open_server: DRPCServer) -> None:
    with DRPCClient(client_conf(open_server)) as client, pytest.raises(DRPCExecutionError) as raised:
        client.execute("nobody", "x")
    assert raised.value.type == "SERVER_TIMEOUT" and raised.value.status == 504
    assert "timed out after 1.5 s" in str(raised.value)
    response = httpx.get(f"http://127.0.0.1:{open_server.port}/drpc/nobody/x", timeout=10)
    assert response.status_code == 504 and response.json()["error"] == "SERVER_TIMEOUT"


def test_a_failed_request_reaches_its_client_with_the_topologys_reason(open_server: DRPCServer) -> None:
    topology = Topology(HttpEndpoint("127.0.0.1", open_server.port, None, None), "picky")
    try:
        with DRPCClient(client_conf(open_server)) as client:
            with pytest.raises(DRPCExecutionError) as raised:
                client.execute("picky", "fail")
            assert raised.value.type == "FAILED_REQUEST" and raised.value.status == 400
            assert "the topology says no" in str(raised.value)
            assert client.execute("picky", "fine") == "fine!"
    finally:
        topology.stop()


def test_a_client_that_goes_away_takes_its_request_with_it(open_server: DRPCServer) -> None:
    with DRPCClient(client_conf(open_server), timeout=0.3) as client, pytest.raises(DRPCExecutionError):
        client.execute("abandoned", "x")
    poll_for(lambda: not open_server.service.core.queues.get("abandoned"), timeout=5,
             message="the abandoned request gone from its queue")
    endpoint = HttpEndpoint("127.0.0.1", open_server.port, None, None)
    try:
        assert endpoint.fetch_request("abandoned", 0) is None
    finally:
        endpoint.close()


def test_arguments_over_the_buffer_size_or_not_text_are_refused(open_server: DRPCServer) -> None:
    base = f"http://127.0.0.1:{open_server.port}/drpc"
    response = httpx.post(f"{base}/f", content=b"x" * 1001)
    assert response.status_code == 413 and "drpc.max_buffer_size" in response.json()["error"]
    response = httpx.get(f"{base}/f/%FF%FE")
    assert response.status_code == 400 and "not UTF-8" in response.json()["error"]
    response = httpx.post(f"{base}/f", content=b"\xff\xfe")
    assert response.status_code == 400 and "not UTF-8" in response.json()["error"]


def test_stopping_the_server_answers_waiting_clients_server_shutdown() -> None:
    server = DRPCServer(config_mod.merge({"squall.secure": False, "drpc.port": 0}))
    server.start()
    errors: list[DRPCExecutionError] = []

    def call() -> None:
        with DRPCClient(client_conf(server)) as client:
            try:
                client.execute("f", "x")
            except DRPCExecutionError as e:
                errors.append(e)

    thread = threading.Thread(target=call)
    thread.start()
    poll_for(lambda: len(server.service.core) == 1, timeout=10, message="the call waiting")
    server.stop()
    thread.join(10)
    assert [(e.type, e.status) for e in errors] == [("SERVER_SHUTDOWN", 503)]


# -- secure: TLS, users and topologies --------------------------------------------------------------


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = Path(tmp_path_factory.mktemp("drpc-secure"))
    zk = DevZookeeper(free_port(), root / "zk", root / "zk.log")
    zk.start()
    keyring, admin_token = Keyring.create()
    bob_token = keyring.add_user("bob")
    keyring.save(root / "keyring.json")
    conf = config_mod.merge({
        "storm.zookeeper.port": zk.port, "squall.keyring.path": str(root / "keyring.json"), "drpc.port": 0,
        "drpc.servers": ["127.0.0.1"], "drpc.request.timeout.secs": 5,
        "drpc.authorizer.acl": {"payroll": {"client.users": ["alice"]}, "handed": {"invocation.user": "bob"}},
        "drpc.max.pending.per.user": 3, "drpc.max.pending.unserved": 4, "drpc.function.release.secs": 1})
    cluster = start_client(conf)
    state = ClusterState(cluster, conf["storm.zookeeper.root"])
    state.setup()
    # t-1 and t-alice are alice's topologies, t-bob bob's (their owners: who submitted them)
    for topology_id, owner in (("t-1", "alice"), ("t-alice", "alice"), ("t-bob", "bob")):
        add_topology(state, topology_id, owner)
    server = DRPCServer(conf)
    try:
        server.start()
        yield {"conf": {**conf, "drpc.port": server.port}, "server": server, "state": state,
               "admin": admin_token, "bob": bob_token, "ca": keyring.ca_pem, "keyring": keyring}
    finally:
        server.stop()
        disconnect(cluster)
        zk.stop()


def add_topology(state: ClusterState, topology_id: str, owner: str) -> None:
    """What nimbus writes for a topology a DRPC server cares about: its record and its credential."""
    state.put_topology({"id": topology_id, "name": topology_id, "owner": owner})
    state.put_drpc_invoker(topology_id, digest(token_of(topology_id)))


def endpoint_of(secure: dict[str, Any], token: str | None) -> HttpEndpoint:
    return HttpEndpoint("127.0.0.1", secure["server"].port, token, secure["ca"])


def https(secure: dict[str, Any], method: str, path: str, token: str | None = None, body: bytes = b"") -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    verify = tls.client_context(ca_pem=secure["ca"])
    with httpx.Client(verify=verify, trust_env=False, timeout=10) as client:
        return client.request(method, f"https://127.0.0.1:{secure['server'].port}{path}", headers=headers,
                              content=body)


def test_over_tls_a_user_calls_and_a_topology_with_its_credential_answers(secure: dict[str, Any]) -> None:
    poll_for(lambda: len(secure["server"].invokers) >= 1, timeout=10, message="the watch saw t-1")
    topology = Topology(endpoint_of(secure, token_of("t-1")), "exclaim")
    try:
        with DRPCClient(secure["conf"]) as client:  # the keyring's admin token, its CA
            assert client.execute("exclaim", "hello") == "hello!"
        assert https(secure, "GET", "/drpc/exclaim/bob", secure["bob"]).text == "bob!"
    finally:
        topology.stop()


def test_no_token_or_a_wrong_one_is_refused_for_calls_and_invocations(secure: dict[str, Any]) -> None:
    for path in ("/drpc/exclaim/x", "/invocations/fetchRequest/exclaim"):
        method = "GET" if path.startswith("/drpc") else "POST"
        for token in (None, "sq_not-a-token", "sqd_t-1.wrong-secret", token_of("t-unknown")):
            response = https(secure, method, path, token)
            assert response.status_code == 401, (path, token, response.text)
    with pytest.raises(DRPCExecutionError) as raised:
        endpoint_of(secure, "sqd_t-1.wrong-secret").fetch_request("exclaim", 0)
    assert raised.value.type == "AUTHORIZATION" and raised.value.status == 401


def test_a_topology_may_not_call_and_a_user_may_not_fetch_or_answer(secure: dict[str, Any]) -> None:
    poll_for(lambda: len(secure["server"].invokers) >= 1, timeout=10, message="the watch saw t-1")
    response = https(secure, "GET", "/drpc/exclaim/x", token_of("t-1"))
    assert response.status_code == 403 and "may not call functions" in response.json()["error"]
    for path in ("/invocations/fetchRequest/f", "/invocations/result/abc", "/invocations/failRequest/abc"):
        response = https(secure, "POST", path, secure["admin"])
        assert response.status_code == 403 and "only a topology's DRPC credential" in response.json()["error"]


def test_the_acl_keeps_a_function_to_its_client_users_and_the_admins(secure: dict[str, Any]) -> None:
    response = https(secure, "GET", "/drpc/payroll/x", secure["bob"])
    assert response.status_code == 403 and "drpc.authorizer.acl" in response.json()["error"]
    topology = Topology(endpoint_of(secure, token_of("t-1")), "payroll")
    try:
        assert https(secure, "GET", "/drpc/payroll/x", secure["admin"]).text == "x!"  # nimbus.admins
    finally:
        topology.stop()


def test_a_removed_topologys_credential_stops_working(secure: dict[str, Any]) -> None:
    state, server = secure["state"], secure["server"]
    add_topology(state, "t-2", "alice")
    poll_for(lambda: server.invokers.identify(token_of("t-2")) == "topology:t-2", timeout=10,
             message="the server knows t-2")
    endpoint = endpoint_of(secure, token_of("t-2"))
    try:
        assert endpoint.fetch_request("exclaim", 0) is None  # let in, nothing to fetch
        state.remove_topology("t-2")
        poll_for(lambda: server.invokers.identify(token_of("t-2")) is None, timeout=10,
                 message="the server forgot t-2")
        with pytest.raises(DRPCExecutionError) as raised:
            endpoint.fetch_request("exclaim", 0)
        assert raised.value.status == 401
    finally:
        endpoint.close()


def test_invokers_check_a_credential_against_its_topologys_hash_only() -> None:
    invokers = Invokers()
    invokers.update({"t-1": digest(token_of("t-1")), "t-2": digest(token_of("t-2"))})
    assert invokers.identify(token_of("t-1")) == "topology:t-1"
    assert invokers.identify(token_of("t-2")) == "topology:t-2"
    assert invokers.identify("sqd_t-1.secret-of-t-2") is None  # another topology's secret
    assert invokers.identify(token_of("t-3")) is None
    assert invokers.identify("sq_user-token") is None
    invokers.update({})
    assert invokers.identify(token_of("t-1")) is None


# -- secure: who serves a function, and how many calls wait --------------------------------------


class Call:
    """A client's call held at the server, from a thread: its answer (status, text) once it ends."""

    def __init__(self, secure: dict[str, Any], token: str, function: str, args: str = "x") -> None:
        self.answer: tuple[int, str] | None = None
        self.started = time.monotonic()
        self.thread = threading.Thread(target=self._run, args=(secure, token, function, args), daemon=True)
        self.thread.start()

    def _run(self, secure: dict[str, Any], token: str, function: str, args: str) -> None:
        response = https(secure, "POST", f"/drpc/{function}", token, args.encode())
        self.answer = (response.status_code, response.text)

    def result(self, timeout: float = 15) -> tuple[int, str]:
        self.thread.join(timeout)
        assert self.answer is not None, "the call did not end"
        return self.answer


def refused(endpoint: HttpEndpoint, action: Any) -> DRPCExecutionError:
    with pytest.raises(DRPCExecutionError) as raised:
        action(endpoint)
    return raised.value


def test_a_function_is_fetched_and_answered_only_by_topologies_of_its_first_servers_owner(
        secure: dict[str, Any]) -> None:
    server = secure["server"]
    poll_for(lambda: {"t-alice", "t-bob"} <= server.invokers.live(), timeout=10,
             message="the topologies seen")
    alice, bob = endpoint_of(secure, token_of("t-alice")), endpoint_of(secure, token_of("t-bob"))
    try:
        # Given alice's topology serving "owned" (its first fetch claims it for alice)
        assert alice.fetch_request("owned", 0) is None
        owner = secure["state"].drpc_owner("owned")
        assert owner is not None and owner[0]["owner"] == "alice" and owner[0]["topologies"] == ["t-alice"]
        # When a client calls it and bob's topology fetches: refused, the call left queued
        call = Call(secure, secure["admin"], "owned", "hello")
        poll_for(lambda: server.service.core.queues.get("owned"), timeout=10, message="the call queued")
        error = refused(bob, lambda e: e.fetch_request("owned", 0))
        assert error.status == 403 and error.type == "AUTHORIZATION"
        assert "belongs to user 'alice'" in str(error)
        # alice's topology takes it; bob's may neither answer nor fail it
        request = alice.fetch_request("owned", 5)
        assert request is not None and request.func_args == "hello"
        for action in (lambda e: e.result(request.request_id, "bob's answer"),
                       lambda e: e.fail_request(request.request_id, "bob says no")):
            assert refused(bob, action).status == 403
        assert request.request_id in server.service.core.requests  # untouched
        # and the client gets alice's answer
        alice.result(request.request_id, "alice's answer")
        assert call.result() == (200, "alice's answer")
    finally:
        alice.close()
        bob.close()


def test_the_acls_invocation_user_serves_a_function_and_its_first_fetcher_does_not(
        secure: dict[str, Any]) -> None:
    poll_for(lambda: {"t-alice", "t-bob"} <= secure["server"].invokers.live(), timeout=10,
             message="the topologies seen")
    alice, bob = endpoint_of(secure, token_of("t-alice")), endpoint_of(secure, token_of("t-bob"))
    try:
        error = refused(alice, lambda e: e.fetch_request("handed", 0))  # first, but not bob
        assert error.status == 403 and "invocation.user" in str(error)
        topology = Topology(bob, "handed", answer=lambda args: f"bob:{args}")
        try:
            assert https(secure, "GET", "/drpc/handed/x", secure["admin"]).text == "bob:x"
        finally:
            topology.stop()
        assert secure["state"].drpc_owner("handed") is None  # the ACL's word is never written down
    finally:
        alice.close()


def test_who_serves_a_function_survives_a_restart_of_the_server(secure: dict[str, Any]) -> None:
    poll_for(lambda: {"t-alice", "t-bob"} <= secure["server"].invokers.live(), timeout=10,
             message="the topologies seen")
    alice = endpoint_of(secure, token_of("t-alice"))
    try:
        assert alice.fetch_request("kept", 0) is None  # alice's now
    finally:
        alice.close()
    # A server started afresh (nothing in its memory) knows it from ZooKeeper
    again = DRPCServer({**secure["conf"], "drpc.port": 0})
    again.start()
    bob = HttpEndpoint("127.0.0.1", again.port, token_of("t-bob"), secure["ca"])
    try:
        poll_for(lambda: "t-bob" in again.invokers.live(), timeout=10, message="the new server's watch")
        error = refused(bob, lambda e: e.fetch_request("kept", 0))
        assert error.status == 403 and "belongs to user 'alice'" in str(error)
    finally:
        bob.close()
        again.stop()


def test_a_function_is_released_once_its_owners_topologies_are_gone(secure: dict[str, Any]) -> None:
    state, server = secure["state"], secure["server"]
    add_topology(state, "t-gone", "alice")
    poll_for(lambda: {"t-gone", "t-bob"} <= server.invokers.live(), timeout=10, message="the topologies seen")
    gone, bob = endpoint_of(secure, token_of("t-gone")), endpoint_of(secure, token_of("t-bob"))
    try:
        assert gone.fetch_request("released", 0) is None
        assert refused(bob, lambda e: e.fetch_request("released", 0)).status == 403
        # When alice's only topology serving it is killed: after drpc.function.release.secs (1 s
        # here) the function is nobody's, and bob's topology may take it
        state.remove_topology("t-gone")

        def bob_serves() -> bool:
            try:
                return bob.fetch_request("released", 0) is None
            except DRPCExecutionError:
                return False

        poll_for(bob_serves, timeout=15, interval=0.2, message="the function released to bob")
        owner = state.drpc_owner("released")
        assert owner is not None and owner[0]["owner"] == "bob"
    finally:
        gone.close()
        bob.close()


def test_calls_past_a_users_cap_or_the_unserved_cap_are_refused_at_once_and_others_served(
        secure: dict[str, Any]) -> None:
    server = secure["server"]
    limits = server.service.limits  # drpc.max.pending.per.user 3, drpc.max.pending.unserved 4
    held = [Call(secure, secure["admin"], "nobody-a") for _ in range(3)]
    poll_for(lambda: limits.held.get("admin") == 3, timeout=10, message="admin's three calls held")
    # The user's next call: 429 at once, saying why
    started = time.monotonic()
    response = https(secure, "POST", "/drpc/nobody-a", secure["admin"], b"x")
    assert response.status_code == 429 and "drpc.max.pending.per.user" in response.json()["error"]
    assert time.monotonic() - started < 2
    # bob may still call: one more unserved call fits, the next is past drpc.max.pending.unserved
    held.append(Call(secure, secure["bob"], "nobody-b"))
    poll_for(lambda: limits.unserved_held == 4, timeout=10, message="bob's call held")
    response = https(secure, "POST", "/drpc/nobody-c", secure["bob"], b"x")
    assert response.status_code == 429 and "drpc.max.pending.unserved" in response.json()["error"]
    # and a function a topology serves answers bob at once
    serving = [Topology(endpoint_of(secure, token_of("t-1")), f) for f in ("exclaim", "nobody-a", "nobody-b")]
    try:
        poll_for(lambda: limits.served("exclaim", server.service.clock.now()), timeout=10,
                 message="exclaim served")
        assert https(secure, "GET", "/drpc/exclaim/bob", secure["bob"]).text == "bob!"
        # the held calls were admitted: their topology, late, answers them
        assert [call.result() for call in held] == [(200, "x!")] * 4
    finally:
        for topology in serving:
            topology.stop()
    assert limits.held == {} and limits.unserved_held == 0


def test_a_user_nimbus_publishes_is_let_in_and_one_it_drops_no_longer(secure: dict[str, Any]) -> None:
    state, keyring = secure["state"], secure["keyring"]
    carol = keyring.add_user("carol") if "carol" not in keyring.users else keyring.rotate_user("carol")
    # A 403 from the ACL (carol is not among payroll's client.users) means she was let in
    assert https(secure, "GET", "/drpc/payroll/x", carol).status_code == 401
    everyone = {name: list(entry["tokens"]) for name, entry in keyring.users.items()}
    state.put_users(everyone)  # what the leading nimbus does when its keyring changes
    try:
        poll_for(lambda: https(secure, "GET", "/drpc/payroll/x", carol).status_code == 403, timeout=10,
                 message="carol let in")
        state.put_users({name: tokens for name, tokens in everyone.items() if name != "carol"})
        poll_for(lambda: https(secure, "GET", "/drpc/payroll/x", carol).status_code == 401, timeout=10,
                 message="carol no longer let in")
        assert https(secure, "GET", "/drpc/payroll/x", secure["bob"]).status_code == 403  # bob still is
    finally:
        state.put_users({name: tokens for name, tokens in everyone.items() if name != "carol"})
