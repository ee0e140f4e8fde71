"""A stranger, a wrong user and a malformed client against a real secure dev cluster's
nimbus (TLS, tokens, the authorizer, the HTTP limits).  Every connection goes to
127.0.0.1; each attack is refused with a clear status and nimbus keeps serving."""

from __future__ import annotations

import base64
import io
import json
import os
import socket
import ssl
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from squall.cli.devcluster import DevCluster
from squall.security import tls
from squall.security.keyring import Keyring
from squall.testing import poll_for

REPO = Path(__file__).resolve().parents[2]
WORDCOUNT = REPO / "examples" / "wordcount.py"
TIMEOUT_SECS = 2
MAX_CONNECTIONS = 8


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    root = tmp_path_factory.mktemp("hostile") / "c"
    c = DevCluster(
        root,
        supervisors=1,
        slots=2,
        conf={
            "nimbus.http.timeout.secs": TIMEOUT_SECS,
            "nimbus.http.max.connections": MAX_CONNECTIONS,
            "nimbus.readonly.users": ["auditor"],
            "nimbus.slots.perTopology": 4,
        },
    )
    root.mkdir(parents=True)
    c.ensure_keyring()
    keyring = Keyring.load(c.keyring_file)
    users = {name: keyring.add_user(name) for name in ("alice", "bob", "carol", "auditor")}
    keyring.save()
    try:
        c.start()
        for name, token in users.items():  # each user's own keyring and config file
            keyring.client_keyring(name, token).save(root / f"{name}.keyring.json")
            conf = {
                **yaml.safe_load(c.config_file.read_text()),
                "squall.keyring.path": str(root / f"{name}.keyring.json"),
            }
            (root / f"{name}.yaml").write_text(yaml.safe_dump(conf))
        c.tokens = users  # type: ignore[attr-defined]
        yield c
    finally:
        c.stop()


def cli(cluster: DevCluster, user: str, *args: str) -> subprocess.CompletedProcess[str]:
    config = cluster.root / f"{user}.yaml" if user != "admin" else cluster.config_file
    return subprocess.run(
        [sys.executable, "-m", "squall.cli", args[0], "--config", str(config), *args[1:]],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )


def call(
    cluster: DevCluster,
    method: str,
    path: str,
    body: bytes | None = None,
    token: Any = True,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """One request over TLS with the cluster's CA; (status, decoded JSON body)."""
    response = cluster.request(method, path, body, token=token, headers=headers)
    return response.status_code, json.loads(response.content or b"null")


def raw_request(cluster: DevCluster, data: bytes, timeout: float = 10) -> bytes:
    """Bytes sent as they are over TLS; what came back before the server closed."""
    context = tls.client_context(ca_pem=Keyring.load(cluster.keyring_file).ca_pem)
    with (
        socket.create_connection(("127.0.0.1", cluster.nimbus_ports[0]), timeout=timeout) as sock,
        context.wrap_socket(sock, server_hostname="127.0.0.1") as conn,
    ):
        conn.sendall(data)
        out = b""
        try:
            while chunk := conn.recv(65536):
                out += chunk
        except (ssl.SSLError, OSError):
            pass
        return out


def nimbus_process(cluster: DevCluster) -> psutil.Process:
    return psutil.Process(cluster.procs["nimbus-0"].pid)


def alive(cluster: DevCluster) -> None:
    assert cluster.dead() == []
    status, _ = call(cluster, "GET", "/api/v1/cluster/summary")
    assert status == 200


# -- authentication -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/v1/cluster"),
        ("GET", "/api/v1/topologies"),
        ("GET", "/api/v1/cluster/summary"),
        ("GET", "/api/v1/cluster/configuration"),
        ("GET", "/api/v1/topology/summary"),
        ("GET", "/metrics"),
        ("POST", "/api/v1/topologies"),
        ("POST", "/api/v1/topologies/x/kill"),
        ("POST", "/api/v1/topology/x/deactivate"),
        ("POST", "/api/v1/topology/x/kill/0"),
    ],
)
def test_no_token_or_a_wrong_one_is_401(cluster: DevCluster, method: str, path: str) -> None:
    body = b"{}" if method == "POST" else None
    for token in (None, "sq_not-a-token", "Basic YWRtaW46YWRtaW4="):
        headers = {"Authorization": token} if token and token.startswith("Basic") else None
        status, answer = call(
            cluster, method, path, body, token=None if headers else token, headers=headers
        )
        assert status == 401, (path, token, answer)
        assert "token" in answer["error"] or "Bearer" in answer["error"]
    alive(cluster)


def test_plain_http_to_the_tls_port_gets_nothing(cluster: DevCluster) -> None:
    with socket.create_connection(("127.0.0.1", cluster.nimbus_ports[0]), timeout=10) as sock:
        sock.sendall(b"GET /api/v1/cluster HTTP/1.0\r\n\r\n")
        try:
            answer = sock.recv(4096)
        except OSError:
            answer = b""
    assert b"200" not in answer and b"supervisors" not in answer
    alive(cluster)


def test_a_client_that_does_not_know_the_ca_refuses_the_connection(cluster: DevCluster) -> None:
    context = ssl.create_default_context()  # the system's CAs, not the cluster's
    with (
        socket.create_connection(("127.0.0.1", cluster.nimbus_ports[0]), timeout=10) as sock,
        pytest.raises(ssl.SSLCertVerificationError),
    ):
        context.wrap_socket(sock, server_hostname="127.0.0.1")


# -- authorization, audit and redaction -----------------------------------------------------


def test_who_may_do_what_to_a_topology(cluster: DevCluster) -> None:
    submitted = cli(
        cluster,
        "alice",
        "submit",
        str(WORDCOUNT),
        "--name",
        "alices",
        "--conf",
        "topology.users=[carol]",
        "--conf",
        "db.password=hunter2",
        "--conf",
        "topology.secret.keys=[my.dsn]",
        "--conf",
        "my.dsn=postgres://u:pw@h/db",
    )
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    try:
        # Its readers (topology.users, read-only users) may read it, not change it; anyone
        # else sees it listed, and not its definition, configuration or errors (issue 47).
        for user, reason in (("auditor", "read-only"), ("bob", "may not deactivate")):
            refused = cli(cluster, user, "deactivate", "alices")
            assert refused.returncode == 1 and reason in refused.stderr, refused.stderr
        for user in ("carol", "auditor"):
            assert cli(cluster, user, "info", "alices", "--json").returncode == 0
        refused = cli(cluster, "bob", "info", "alices", "--json")
        assert refused.returncode == 1 and "may not read topology 'alices'" in refused.stderr, refused.stderr
        for path in ("/api/v1/topology/alices", "/api/v1/topology/alices/component/split",
                     "/api/v1/topology/alices/visualization", "/api/v1/topology-workers/alices",
                     "/api/v1/topologies/alices"):
            status, answer = call(cluster, "GET", path, token=cluster.tokens["bob"])  # type: ignore[attr-defined]
            assert status == 403 and "may not read topology" in answer["error"], (path, answer)
        listed = cli(cluster, "bob", "list")
        assert listed.returncode == 0 and "alices" in listed.stdout
        refused = cli(cluster, "bob", "kill", "alices")
        assert refused.returncode == 1 and "may not kill" in refused.stderr, refused.stderr
        # Nor its log levels (Storm's setLogConfig), by the CLI or the REST API; reading them is anyone's.
        refused = cli(cluster, "bob", "set_log_level", "-l", "ROOT=DEBUG:5", "alices")
        assert refused.returncode == 1 and "may not set_log_level" in refused.stderr, refused.stderr
        status, answer = call(cluster, "POST", "/api/v1/topology/alices/logconfig",
                              b'{"namedLoggerLevels": {"ROOT": {"target_level": "DEBUG", "timeout": 5}}}',
                              token=cluster.tokens["bob"])  # type: ignore[attr-defined]
        assert status == 403 and "may not set_log_level" in answer["error"], answer
        status, answer = call(cluster, "GET", "/api/v1/topology/alices/logconfig",
                              token=cluster.tokens["carol"])  # type: ignore[attr-defined]
        assert (status, answer) == (200, {"namedLoggerLevels": {}})
        # Self-regulation acts through rebalance: switched only by who may rebalance; its log
        # read by the topology's readers only; an unknown action is no endpoint (issue 50).
        for user, reason in (("bob", "may not rebalance"), ("auditor", "read-only")):
            status, answer = call(cluster, "POST", "/api/v1/topology/alices/autoscale/enable",
                                  token=cluster.tokens[user])  # type: ignore[attr-defined]
            assert status == 403 and reason in answer["error"], answer
        status, answer = call(cluster, "GET", "/api/v1/topology/alices/autoscale",
                              token=cluster.tokens["bob"])  # type: ignore[attr-defined]
        assert status == 403 and "may not read topology" in answer["error"], answer
        status, answer = call(cluster, "POST", "/api/v1/topology/alices/autoscale/resize",
                              token=cluster.tokens["carol"])  # type: ignore[attr-defined]
        assert status == 404, answer
        assert cli(cluster, "carol", "autoscale", "enable", "alices").returncode == 0
        assert cli(cluster, "auditor", "autoscale", "log", "alices").returncode == 0
        assert cluster.api("GET", "topology/alices/autoscale")["enabled"] is True
        # A setting out of its bounds is refused at submit, naming the key.
        refused = cli(cluster, "alice", "submit", str(WORDCOUNT), "--name", "badscale",
                      "--conf", "topology.autoscale.capacity.high=-1")
        assert refused.returncode == 1, refused.stderr
        assert "topology.autoscale.capacity.high" in refused.stderr, refused.stderr
        # A read-only user may not submit either.
        assert "read-only" in cli(cluster, "auditor", "submit", str(WORDCOUNT), "--name", "aud").stderr
        # topology.users and the admin may; the topology is still there and active.
        assert cli(cluster, "carol", "deactivate", "alices").returncode == 0
        assert cli(cluster, "carol", "set_log_level", "-l", "ROOT=DEBUG:5", "alices").returncode == 0
        assert cli(cluster, "admin", "activate", "alices").returncode == 0
        info = cluster.api("GET", "topologies/alices")
        assert info["status"] == "active"
        debug_sampling_is_its_users_and_checked(cluster)
        # Secrets in its conf never come back, in any answer.
        text = json.dumps(info)
        assert "hunter2" not in text and "pw@h" not in text and info["conf"]["db.password"] == "*****"
        status, page = call(cluster, "GET", f"/api/v1/topology/{info['id']}")
        assert status == 200 and "hunter2" not in json.dumps(page) and "pw@h" not in json.dumps(page)
    finally:
        assert cli(cluster, "alice", "kill", "alices", "--wait", "0").returncode == 0
    poll_for(lambda: cluster.api("GET", "topologies") == [], timeout=60, message="alices killed")
    # Every change, allowed or refused, left an audit line naming who; no log holds the secret.
    logs = "".join(p.read_text(errors="replace") for p in (cluster.root / "logs").glob("*.log"))
    audit = [line for line in logs.splitlines() if "audit" in line and "alices" in line]
    assert any("user=bob" in line and "outcome=refused" in line and "/kill" in line for line in audit), (
        audit
    )
    assert any("user=carol" in line and "outcome=ok" in line and "deactivate" in line for line in audit)
    assert any("user=bob" in line and "outcome=refused" in line and "/logconfig" in line for line in audit)
    assert any("user=carol" in line and "outcome=ok" in line and "/logconfig" in line for line in audit)
    assert any("user=alice" in line and "outcome=ok" in line and "/kill" in line for line in audit)
    workers = "".join(p.read_text(errors="replace") for p in cluster.root.rglob("worker.log"))
    assert "hunter2" not in logs + workers and "pw@h" not in logs + workers


def events_logs(cluster: DevCluster) -> str:
    return "".join(p.read_text(errors="replace") for p in cluster.root.rglob("events.log"))


def debug_sampling_is_its_users_and_checked(cluster: DevCluster) -> None:
    """Storm's debug action on alice's running word count (issue 50): a stranger may not; what
    its own users send is checked (400 naming it, 404 for a component it lacks) before
    anything is written; then split's tuples reach the sandboxed worker's events.log (a
    descriptor the supervisor opened, in a directory the worker never sees), and stop."""
    bob, carol = cluster.tokens["bob"], cluster.tokens["carol"]  # type: ignore[attr-defined]
    refused = cli(cluster, "bob", "debug", "alices", "-c", "split", "--enable")
    assert refused.returncode == 1 and "may not debug" in refused.stderr, refused.stderr
    for path in ("debug/enable/10", "component/split/debug/enable/10"):
        status, answer = call(cluster, "POST", f"/api/v1/topology/alices/{path}", b"", token=bob)
        assert status == 403 and "may not debug" in answer["error"], answer
    for path, code, fragment in (
        ("debug/enable/NaN", 400, "a number from 0 to 100, got 'NaN'"),
        ("debug/enable/inf", 400, "a number from 0 to 100, got 'inf'"),
        ("debug/enable/101", 400, "a number from 0 to 100, got '101'"),
        ("debug/enable/-1", 400, "a number from 0 to 100, got '-1'"),
        ("debug/enable/ten", 400, "a number from 0 to 100, got 'ten'"),
        ("debug/enable/" + "9" * 400, 400, "a number from 0 to 100"),
        ("debug/start/10", 400, "enable or disable, got 'start'"),
        ("component/nope/debug/enable/10", 404, "has no component 'nope'"),
        ("component/%2F..%2F..%2Fetc/debug/enable/10", 404, "has no component '/../../etc'"),
    ):
        status, answer = call(cluster, "POST", f"/api/v1/topology/alices/{path}", b"", token=carol)
        assert status == code and fragment in answer["error"], (path, answer)
    assert cluster.api("GET", "topology/alices")["debug"] is False  # nothing was written
    enabled = cli(cluster, "carol", "debug", "alices", "-c", "split", "--enable", "--pct", "100")
    assert enabled.returncode == 0, enabled.stderr
    poll_for(lambda: ",split," in events_logs(cluster), timeout=90, message="split's tuples in events.log")
    assert ",sentences," not in events_logs(cluster) and ",count," not in events_logs(cluster)
    assert cli(cluster, "carol", "debug", "alices", "-c", "split", "--disable").returncode == 0
    alive(cluster)


def test_zookeeper_without_the_cluster_password_reads_nothing(cluster: DevCluster) -> None:
    port = cluster.conf["storm.zookeeper.port"]
    stranger = KazooClient(hosts=f"127.0.0.1:{port}")
    stranger.start(timeout=15)
    try:
        for path in ("/squall", "/squall/topologies", "/squall/assignments", "/squall/code",
                     "/squall/secrets"):
            with pytest.raises(NoAuthError):
                stranger.get_children(path)
        with pytest.raises(NoAuthError):
            stranger.create("/squall/assignments/forged", b"{}")
    finally:
        stranger.stop()
        stranger.close()


# -- malformed and oversized requests ----------------------------------------------------------


@pytest.mark.parametrize(
    ("head", "body", "fragment"),
    [
        ("Content-Length: -1", b"", "Content-Length"),
        ("Content-Length: abc", b"", "Content-Length"),
        ("Content-Length: 10", b'{"a":', "body"),
        ("Content-Length: 2048", b"[" * 1024 + b"]" * 1024, "valid JSON"),
        ("Content-Length: 4", b'{"\xff"', "valid JSON"),
        ("Content-Length: 99999999999", b"", "over"),
    ],
)
def test_malformed_requests_get_400_not_500(
    cluster: DevCluster, head: str, body: bytes, fragment: str
) -> None:
    token = Keyring.load(cluster.keyring_file).client_token
    request = (
        f"POST /api/v1/topologies HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f"{head}\r\nConnection: close\r\n\r\n"
    ).encode() + body
    answer = raw_request(cluster, request, timeout=TIMEOUT_SECS * 5)
    status = int(answer.split(b" ", 2)[1])
    assert status in (400, 408, 413), answer[:300]
    assert fragment.encode() in answer
    alive(cluster)


def test_kill_with_nan_wait_is_refused(cluster: DevCluster) -> None:
    for action in ("kill", "rebalance"):  # rebalance's wait deactivates, then moves (issue 50)
        for wait in ("NaN", "Infinity"):
            status, answer = call(
                cluster, "POST", f"/api/v1/topologies/none/{action}", f'{{"wait_secs": {wait}}}'.encode()
            )
            assert status in (400, 404), answer
        status, answer = call(cluster, "POST", f"/api/v1/topology/none/{action}/nan", b"")
        assert status == 400, answer
    alive(cluster)


def test_slow_loris_cannot_starve_nimbus(cluster: DevCluster) -> None:
    nimbus = nimbus_process(cluster)
    threads_before = nimbus.num_threads()
    context = tls.client_context(ca_pem=Keyring.load(cluster.keyring_file).ca_pem)
    slow = []
    try:
        for _ in range(MAX_CONNECTIONS * 4):  # each sends half a request line, then nothing
            sock = socket.create_connection(("127.0.0.1", cluster.nimbus_ports[0]), timeout=10)
            slow.append(sock)
            sock.sendall(b"\x16\x03\x01")  # the first bytes of a TLS hello, and no more
        # Nimbus serves at most its cap at once: no thread per attacker.
        assert nimbus.num_threads() <= threads_before + MAX_CONNECTIONS + 2
        # Within the deadline every one of them is cut off, and nimbus answers again.
        deadline = time.monotonic() + TIMEOUT_SECS * 5
        for sock in slow:
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                while sock.recv(4096):
                    pass  # a 503 for those past the cap, then the close
            except OSError:
                pass
        poll_for(
            lambda: call(cluster, "GET", "/api/v1/cluster/summary")[0] == 200,
            timeout=TIMEOUT_SECS * 3,
            message="nimbus answers after the attack",
        )
    finally:
        for sock in slow:
            sock.close()
    # The same with a completed handshake and a request that never ends.
    with (
        socket.create_connection(("127.0.0.1", cluster.nimbus_ports[0]), timeout=30) as sock,
        context.wrap_socket(sock, server_hostname="127.0.0.1") as conn,
    ):
        started = time.monotonic()
        conn.sendall(b"GET /api/v1/cluster HTTP/1.1\r\nHost: x\r\n")
        for _ in range(TIMEOUT_SECS * 10):
            try:
                conn.sendall(b"X-a: b\r\n")  # a header line every 0.2 s: each read is quick
            except OSError:
                break
            time.sleep(0.2)
        assert time.monotonic() - started < TIMEOUT_SECS * 3, "a dribbling client was not cut off"
    alive(cluster)


# -- what a submit may ask for -------------------------------------------------------------------


def submit_body(
    name: str,
    components: list[dict[str, Any]],
    code: bytes | None = None,
    conf: dict[str, Any] | None = None,
) -> bytes:
    return json.dumps(
        {
            "name": name,
            "conf": conf or {},
            "topology": {"name": name, "config": {}, "components": components},
            "code": base64.b64encode(code).decode() if code is not None else None,
        }
    ).encode()


SPOUT = {
    "name": "s",
    "kind": "spout",
    "class": "wordcount:RandomSentences",
    "par": 1,
    "tasks": 1,
    "config": {},
    "streams": [{"name": "default", "fields": ["sentence"], "direct": False}],
    "inputs": [],
    "options": {},
}


def test_parallelism_and_workers_are_capped(cluster: DevCluster) -> None:
    started = time.monotonic()
    status, answer = call(
        cluster,
        "POST",
        "/api/v1/topologies",
        submit_body("huge", [{**SPOUT, "par": 10**9, "tasks": 10**9}]),
    )
    assert status == 400 and "nimbus.executors.perTopology" in answer["error"], answer
    assert time.monotonic() - started < 10  # refused before planning a billion executors
    status, answer = call(
        cluster, "POST", "/api/v1/topologies", submit_body("wide", [SPOUT], conf={"topology.workers": 1000})
    )
    assert status == 400 and "nimbus.slots.perTopology" in answer["error"], answer
    alive(cluster)


@pytest.mark.parametrize(
    ("component_conf", "conf", "named"),
    [
        ({"topology.component.resources.onheap.memory.mb": 10**12}, {}, "over the most Squall accepts"),
        ({"topology.component.cpu.pcore.percent": True}, {}, "topology.component.cpu.pcore.percent"),
        ({"topology.component.resources.offheap.memory.mb": -1}, {}, "offheap.memory.mb"),
        ({}, {"topology.worker.max.heap.size.mb": "lots"}, "topology.worker.max.heap.size.mb"),
        ({}, {"topology.component.resources.onheap.memory.mb": 10**6}, "no worker could hold one"),
    ],
)
def test_absurd_resource_declarations_are_refused_at_submit(
    cluster: DevCluster, component_conf: dict[str, Any], conf: dict[str, Any], named: str
) -> None:
    # docs/scheduling.md: what the resource-aware scheduler packs by and the supervisors kill by
    body = submit_body("sized", [{**SPOUT, "config": component_conf}], conf=conf)
    status, answer = call(cluster, "POST", "/api/v1/topologies", body)
    assert status == 400 and named in answer["error"], answer
    alive(cluster)


def test_the_zip_bomb_is_refused(cluster: DevCluster) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for i in range(3):
            zf.writestr(f"zeros{i}.bin", b"\0" * (100 * 1024 * 1024))
    bomb = buf.getvalue()
    assert len(bomb) < 1024 * 1024
    status, answer = call(cluster, "POST", "/api/v1/topologies", submit_body("bomb", [SPOUT], bomb))
    assert status == 400 and "refused" in answer["error"], answer
    alive(cluster)


def test_code_that_exits_at_import_is_not_taken_for_verified(cluster: DevCluster, tmp_path: Path) -> None:
    (tmp_path / "sneaky.py").write_text("import os\nos._exit(0)\n")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.write(tmp_path / "sneaky.py", "sneaky.py")
    status, answer = call(
        cluster,
        "POST",
        "/api/v1/topologies",
        submit_body("sneaky", [{**SPOUT, "class": "sneaky:Spout"}], buf.getvalue()),
    )
    assert status == 400 and "before it reported success" in answer["error"], answer
    assert cluster.api("GET", "topologies") == []


# -- fuzzing the request parser ---------------------------------------------------------------------


METHODS = st.sampled_from([b"GET", b"POST", b"PUT", b"DELETE", b"\x00", b"G\xffT", b""])
PATHS = st.one_of(
    st.sampled_from(
        [
            b"/",
            b"/api/v1/topologies",
            b"/api/v1/topology/x/kill/1",
            b"/metrics",
            b"/api/v1/topology/%2e%2e/component/%ff",
            b"*",
        ]
    ),
    st.binary(max_size=64).map(lambda b: b"/" + b.replace(b" ", b"").replace(b"\r", b"")),
)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    method=METHODS,
    path=PATHS,
    version=st.sampled_from([b"HTTP/1.0", b"HTTP/1.1", b"HTTP/9", b""]),
    headers=st.lists(st.binary(max_size=40), max_size=5),
    body=st.binary(max_size=200),
    authorized=st.booleans(),
)
def test_fuzzed_requests_never_get_a_500_or_hurt_nimbus(
    cluster: DevCluster,
    method: bytes,
    path: bytes,
    version: bytes,
    headers: list[bytes],
    body: bytes,
    authorized: bool,
) -> None:
    token = Keyring.load(cluster.keyring_file).client_token
    lines = [b" ".join(p for p in (method, path, version) if p)]
    if authorized:
        lines.append(f"Authorization: Bearer {token}".encode())
    lines += [h.replace(b"\r", b"").replace(b"\n", b"") for h in headers]
    lines.append(b"Content-Length: %d" % len(body))
    answer = raw_request(cluster, b"\r\n".join(lines) + b"\r\n\r\n" + body, timeout=TIMEOUT_SECS * 5)
    if answer:
        status_line = answer.split(b"\r\n", 1)[0]
        assert status_line.startswith(b"HTTP/"), answer[:200]
        assert int(status_line.split(b" ")[1]) < 500, answer[:400]
    assert nimbus_process(cluster).is_running()


def logviewer_token(cluster: DevCluster, user: str, link: str) -> str:
    base = link.split("/api/v1/", 1)[0]
    answer = cluster.request("POST", "/api/v1/logviewer/token", json.dumps({"logviewer": base}).encode(),
                             token=cluster.tokens[user])  # type: ignore[attr-defined]
    assert answer.status_code == 200, answer.text
    return answer.json()["token"]  # type: ignore[no-any-return]


def test_a_workers_stacks_and_profile_by_its_owner_only(cluster: DevCluster, tmp_path: Path) -> None:
    """Issue 50: Storm's profiling endpoints and `squall profile`, py-spy reaching the sandboxed
    workers from their root supervisor; hostile paths, users and readers refused."""
    submitted = cli(cluster, "alice", "submit", str(WORDCOUNT), "--name", "profiled",
                    "--conf", "topology.users=[carol]")
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    try:
        poll_for(lambda: cluster.worker_pids(), timeout=60, message="the word count's worker running")
        poll_for(lambda: cluster.api("GET", "topology/profiled")["workers"], timeout=30,
                 message="its worker in the topology page")
        # When its owner asks for the stacks of the workers running split
        dumped = cli(cluster, "alice", "profile", "profiled", "-c", "split", "--dump")
        # Then each thread's stack is printed, split's executor threads named
        assert dumped.returncode == 0, dumped.stdout + dumped.stderr
        assert "executor threads of split: executor-split-" in dumped.stdout
        assert 'Thread ' in dumped.stdout and '"executor-split-' in dumped.stdout, dumped.stdout
        # And a 2 s profile is a flame graph saved where asked
        recorded = cli(cluster, "carol", "profile", "profiled", "-c", "split", "--seconds", "2",
                       "-o", str(tmp_path))
        assert recorded.returncode == 0, recorded.stdout + recorded.stderr
        saved = Path(recorded.stdout.strip().rsplit(": ", 1)[1])
        assert saved.parent == tmp_path and saved.suffix == ".svg" and b"<svg" in saved.read_bytes()
        # A component that is not there, and one that is, are told apart
        refused = cli(cluster, "alice", "profile", "profiled", "-c", "nope", "--dump")
        assert refused.returncode == 1 and "has no component 'nope'" in refused.stderr, refused.stderr

        # Storm's paths: nobody but its owner, topology.users and the admins may profile it
        worker = "{host}:{port}".format(**cluster.api("GET", "topology/profiled")["workers"][0])
        base = "/api/v1/topology/profiled/profiling"
        status, answer = call(cluster, "GET", f"{base}/dumpjstack/{worker}",
                              token=cluster.tokens["bob"])  # type: ignore[attr-defined]
        assert status == 403 and "may not profile" in answer["error"], answer
        status, answer = call(cluster, "POST", f"{base}/dumpjstack/{worker}",
                              token=cluster.tokens["auditor"])  # type: ignore[attr-defined]
        assert status == 403 and "read-only" in answer["error"], answer
        # Its timeout is a bounded positive number of minutes, or seconds with an s
        for timeout in ("nan", "0", "-1", "11", "601s", "1e3", "inf", "x" * 300):
            status, answer = call(cluster, "GET", f"{base}/start/{worker}/{timeout}")
            assert status == 400 and ("timeout" in answer["error"] or "seconds" in answer["error"]), answer
        # The worker must be one of the topology's: its host and port
        for other, code in (("127.0.0.1:1", 404), ("not-a-worker", 400), ("..%2F..%2Fetc:6700", 404),
                            (f"{worker.rsplit(':', 1)[0]}:99999", 400)):
            status, answer = call(cluster, "GET", f"{base}/dumpjstack/{other}")
            assert status == code, (other, answer)
        status, answer = call(cluster, "GET", f"{base}/dumpheap/{worker}")
        assert status == 501 and "no heap" in answer["error"], answer
        for path in (f"{base}/start/{worker}", f"{base}/rm/{worker}",
                     f"{base}/start/{worker}/1s?format=evil"):
            status, answer = call(cluster, "GET", path)
            assert status in (400, 404), (path, answer)
        status, answer = call(cluster, "GET", "/api/v1/topology/nope/profiling/dumpjstack/h:1")
        assert status == 404, answer
        # The outputs: listed for its readers only, through the logviewer's minted tokens
        status, answer = call(cluster, "GET", f"{base}/dumpjstack/{worker}")
        link = answer["dumplink"]
        assert status == 200 and link.endswith(f"/{worker.replace(':', '%3A')}") and "/api/v1/dumps/" in link
        assert cluster.request("GET", link, token=None).status_code == 401
        forbidden = cluster.request("GET", link, token=logviewer_token(cluster, "bob", link))
        assert forbidden.status_code == 403, forbidden.text
        files = cluster.request("GET", link, token=logviewer_token(cluster, "alice", link)).json()["files"]
        assert {f["kind"] for f in files} >= {"jstack", "record"}, files
        for name in ("worker.log", "..%2Freaders.json", "readers.json"):
            got = cluster.request("GET", f"{link}/{name}", token=logviewer_token(cluster, "alice", link))
            assert got.status_code in (400, 404), (name, got.text)
        # Storm's start for a minute, stopped at once: what was sampled is written now
        status, started = call(cluster, "GET", f"{base}/start/{worker}/1?format=speedscope")
        assert status == 200 and started["seconds"] == 60, started
        assert call(cluster, "POST", f"{base}/stop/{worker}")[0] == 200
        token = logviewer_token(cluster, "alice", link)
        poll_for(lambda: [f for f in cluster.request("GET", link, token=token).json()["files"]
                          if f["request"] == started["request"] and f["name"].endswith(".json")],
                 timeout=30, message="the stopped profile written")
        # And restartworker: the worker is killed and its supervisor starts it again
        before = set(cluster.worker_pids().values())
        assert call(cluster, "POST", f"{base}/restartworker/{worker}")[0] == 200
        poll_for(lambda: (now := set(cluster.worker_pids().values())) and not now & before, timeout=60,
                 message="the worker restarted")
    finally:
        assert cli(cluster, "alice", "kill", "profiled", "--wait", "0").returncode == 0
    poll_for(lambda: cluster.api("GET", "topologies") == [], timeout=60, message="profiled killed")
    # Storm's profiling GETs change things: each leaves an audit line naming who, as a POST does
    logs = "".join(p.read_text(errors="replace") for p in (cluster.root / "logs").glob("nimbus*.log"))
    audit = [line for line in logs.splitlines() if "audit" in line and "/profiling/" in line]
    assert any("user=bob" in line and "outcome=refused" in line and "GET" in line for line in audit), audit
    assert any("user=admin" in line and "outcome=ok" in line and "restartworker" in line for line in audit)
    alive(cluster)


def test_nimbus_survived_everything(cluster: DevCluster) -> None:
    alive(cluster)
    assert os.path.exists(cluster.root / "logs" / "nimbus-0.log")


def test_dotfiles_and_keys_stay_out_of_the_code_package(cluster: DevCluster, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".aws").mkdir(parents=True)
    (project / "wordcount.py").write_text(WORDCOUNT.read_text())
    (project / ".env").write_text("DB_PASSWORD=hunter2\n")
    (project / ".aws" / "credentials").write_text("[default]\naws_secret_access_key=abc\n")
    (project / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    # and files the topology does not import (issue 30: all of examples/ went)
    (project / "unrelated.py").write_text("X = 1\n")
    (project / "customers.csv").write_text("alice,bob\n")
    submitted = cli(cluster, "alice", "submit", str(project / "wordcount.py"), "--name", "dotfiles")
    assert submitted.returncode == 0, submitted.stderr
    try:
        # The manifest printed at submit names what went, and only that
        assert "wordcount.py" in submitted.stdout
        for secret in (".env", "credentials", "id_rsa", "unrelated.py", "customers.csv"):
            assert secret not in submitted.stdout
        # and the package in ZooKeeper holds nothing else.
        (topology,) = [t for t in cluster.api("GET", "topologies") if t["name"] == "dotfiles"]
        keyring = Keyring.load(cluster.keyring_file)
        (user, password), *_ = keyring.zookeeper_credentials()
        zk = KazooClient(hosts=f"127.0.0.1:{cluster.conf['storm.zookeeper.port']}",
                         auth_data=[("digest", f"{user}:{password}")])
        zk.start(timeout=15)
        try:
            base = f"/squall/code/{topology['id']}"
            blob = b"".join(zk.get(f"{base}/{c}")[0] for c in sorted(zk.get_children(base)))
        finally:
            zk.stop()
            zk.close()
        assert zipfile.ZipFile(io.BytesIO(blob)).namelist() == ["wordcount.py"]
    finally:
        assert cli(cluster, "alice", "kill", "dotfiles", "--wait", "0").returncode == 0
