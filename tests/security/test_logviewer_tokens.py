"""The logviewers on a real secure dev cluster (two supervisors) take only the short-lived
tokens nimbus mints for one user and one logviewer: a user added after the cluster started
reads their topology's log at once, with no supervisor keyring rewritten; a user's own
token, another logviewer's, an expired, tampered or forged one are refused; the readers
records still decide; and one user cannot hold every place at a logviewer or at nimbus.
Every connection goes to 127.0.0.1.  (The format, on a clock: tests/security/test_logtokens.py.)"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from kazoo.client import KazooClient

from squall import config
from squall.cli.devcluster import DevCluster
from squall.security import logtokens, tls
from squall.security.keyring import Keyring
from squall.testing import poll_for

REPO = Path(__file__).resolve().parents[2]
WORDCOUNT = REPO / "examples" / "wordcount.py"
LOGVIEWER_PER_USER = 2
NIMBUS_PER_USER = 3
BIG_LOG_BYTES = 24 * 1024 * 1024  # far past what the socket buffers of a reader who stopped hold


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    root = tmp_path_factory.mktemp("logtokens") / "c"
    c = DevCluster(root, supervisors=2, slots=1, drpc=False, conf={
        "logviewer.max.requests.per.user": LOGVIEWER_PER_USER,
        "nimbus.http.max.connections.per.user": NIMBUS_PER_USER})
    try:
        c.start()
        # Users added while it runs: nimbus re-reads its keyring; nothing is written for the supervisors.
        tokens = {name: c.add_user(name) for name in ("bob", "carol")}
        c.tokens = {**tokens, "admin": Keyring.load(c.keyring_file).client_token}  # type: ignore[attr-defined]
        yield c
    finally:
        c.stop()


def token_of(cluster: DevCluster, user: str) -> str:
    return cluster.tokens[user]  # type: ignore[attr-defined,no-any-return]


def context(cluster: DevCluster) -> ssl.SSLContext:
    return tls.client_context(ca_pem=Keyring.load(cluster.keyring_file).ca_pem)


def get(cluster: DevCluster, url: str, token: str | None) -> httpx.Response:
    return cluster.request("GET", url, token=token, headers={"Accept": "text/plain"})


def mint(cluster: DevCluster, user: str, logviewer: str) -> httpx.Response:
    body = json.dumps({"logviewer": logviewer}).encode()
    return cluster.request("POST", "/api/v1/logviewer/token", body, token=token_of(cluster, user))


def minted(cluster: DevCluster, user: str, logviewer: str) -> str:
    answer = mint(cluster, user, logviewer)
    assert answer.status_code == 200, answer.text
    assert answer.json()["user"] == user and answer.json()["logviewer"] == logviewer
    return answer.json()["token"]  # type: ignore[no-any-return]


def origin(link: str) -> str:
    parts = urlsplit(link)
    return f"{parts.scheme}://{parts.netloc}"


@pytest.fixture(scope="module")
def logviewers(cluster: DevCluster) -> list[str]:
    def registered() -> list[str] | None:
        supervisors = cluster.api("GET", "cluster")["supervisors"]
        found = sorted(s["logviewer"] for s in supervisors if s.get("logviewer"))
        return found if len(found) == 2 else None

    return poll_for(registered, timeout=30, message="both supervisors' logviewers")  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def bobs_log(cluster: DevCluster, logviewers: list[str]) -> str:
    """The link to the worker log of the topology bob (added after the start) submitted."""
    supervisor_keyring = cluster.supervisor_keyring_file.read_bytes()
    proc = subprocess.run([sys.executable, "-m", "squall.cli", "submit", str(WORDCOUNT), "--name", "bobwc",
                           "--config", str(cluster.root / "bob.yaml"), "--conf", "topology.workers=1"],
                          capture_output=True, text=True, timeout=90, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    def link() -> str | None:
        page = cluster.request("GET", "/api/v1/topology/bobwc", token=token_of(cluster, "bob")).json()
        links = [w.get("workerLogLink") for w in page.get("workers") or []]
        return links[0] if links and links[0] else None

    found: str = poll_for(link, timeout=60, message="bob's worker and its log link")
    # No supervisor's keyring was written again, and none names a user
    assert cluster.supervisor_keyring_file.read_bytes() == supervisor_keyring
    assert "users" not in Keyring.load(cluster.supervisor_keyring_file).data
    return found


def test_a_user_added_after_the_start_reads_their_topologys_log_at_once(cluster: DevCluster,
                                                                         bobs_log: str) -> None:
    token = minted(cluster, "bob", origin(bobs_log))
    assert token.startswith(logtokens.PREFIX) and token_of(cluster, "bob") not in token

    answers: list[httpx.Response] = []

    def read() -> str | None:
        # Until its worker launched there is no log, nor the record of who may read it (then
        # the admins only): the worker's start is what is waited for, never a keyring.
        answers.append(get(cluster, bobs_log, token))
        return answers[-1].text if answers[-1].status_code == 200 and answers[-1].text else None

    try:
        poll_for(read, timeout=60, interval=0.2, message="bob's worker log to have lines")
    except AssertionError as e:
        raise AssertionError(f"{e}: last answer {answers[-1].status_code} {answers[-1].text[:300]}") from None
    # `squall logs` as bob: nimbus mints each logviewer's token; bob's own goes to nimbus only
    proc = subprocess.run([sys.executable, "-m", "squall.cli", "logs", "bobwc", "--config",
                           str(cluster.root / "bob.yaml")],
                          capture_output=True, text=True, timeout=60, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines and all(line.startswith("127.0.0.1:") for line in lines), lines[:5]


def test_a_users_own_token_is_refused_by_every_logviewer(cluster: DevCluster, bobs_log: str,
                                                         logviewers: list[str]) -> None:
    for user in ("bob", "admin"):
        answer = get(cluster, bobs_log, token_of(cluster, user))
        assert answer.status_code == 401, answer.text
        assert "only the tokens nimbus mints" in answer.json()["error"]
    for viewer in logviewers:
        assert get(cluster, viewer + "/api/v1/listLogs", token_of(cluster, "admin")).status_code == 401


def test_a_token_is_for_one_logviewer_only_and_only_for_one_registered(cluster: DevCluster, bobs_log: str,
                                                                       logviewers: list[str]) -> None:
    path = bobs_log[len(origin(bobs_log)):]
    (other,) = [v for v in logviewers if v != origin(bobs_log)]
    for_other = minted(cluster, "bob", other)
    refused = get(cluster, bobs_log, for_other)
    assert refused.status_code == 401 and "another logviewer" in refused.json()["error"]
    for_this = minted(cluster, "bob", origin(bobs_log))
    assert get(cluster, bobs_log, for_this).status_code == 200
    assert get(cluster, other + path, for_this).status_code == 401
    # Nimbus mints for the logviewers supervisors registered, nothing else
    for unknown in ("https://127.0.0.1:1", "https://evil.example:443", bobs_log, "not a url"):
        answer = mint(cluster, "bob", unknown)
        assert answer.status_code == 404, (unknown, answer.text)
    assert mint(cluster, "bob", "").status_code == 400
    # and only to a user nimbus knows
    stranger = cluster.request("POST", "/api/v1/logviewer/token", json.dumps({"logviewer": other}).encode(),
                               token="sq_nobody")
    assert stranger.status_code == 401


def _payload(token: str) -> tuple[dict[str, Any], str]:
    body, _, signature = token.rpartition(".")
    return json.loads(base64.urlsafe_b64decode(body[len(logtokens.PREFIX):] + "==")), signature


def _body(payload: dict[str, Any]) -> str:
    raw = json.dumps(payload, separators=(",", ":")).encode()
    return logtokens.PREFIX + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _signed(key: Ed25519PrivateKey, payload: dict[str, Any]) -> str:
    body = _body(payload)
    return body + "." + base64.urlsafe_b64encode(key.sign(body.encode())).rstrip(b"=").decode()


def test_expired_tampered_and_forged_tokens_are_refused(cluster: DevCluster, bobs_log: str) -> None:
    viewer = origin(bobs_log)
    keyring = Keyring.load(cluster.keyring_file)
    assert keyring.ca_key_pem
    # Expired: minted with nimbus's own key by a clock an hour behind
    key = logtokens.signing_key(keyring.ca_key_pem)
    old = logtokens.Minter(key, 300, lambda: time.time() - 3600).mint("bob", viewer).token
    answer = get(cluster, bobs_log, old)
    assert answer.status_code == 401 and "expired" in answer.json()["error"]
    # Tampered: bob's token made out to the admin, or made to last a day
    payload, signature = _payload(minted(cluster, "bob", viewer))
    for change in ({"sub": "admin"}, {"exp": payload["exp"] + 86400}):
        answer = get(cluster, bobs_log, _body({**payload, **change}) + "." + signature)
        assert answer.status_code == 401 and "bad signature" in answer.json()["error"], answer.text
    # Forged: a key of one's own under nimbus's key id, or under its own
    forger = Ed25519PrivateKey.generate()
    assert get(cluster, bobs_log, _signed(forger, {**payload, "sub": "admin"})).status_code == 401
    own = logtokens.Minter(forger, 300, time.time).mint("admin", viewer).token
    answer = get(cluster, bobs_log, own)
    assert answer.status_code == 401 and "does not trust" in answer.json()["error"]


def test_a_key_planted_in_zookeeper_without_the_cas_endorsement_is_not_trusted(cluster: DevCluster,
                                                                               bobs_log: str) -> None:
    # Whoever holds ZooKeeper's password (every supervisor does) can write the keys' node;
    # a key the cluster's CA did not endorse is dropped all the same.
    viewer = origin(bobs_log)
    user, password = Keyring.load(cluster.keyring_file).zookeeper_credentials()[0]
    path = config.merge(cluster.conf)["storm.zookeeper.root"] + "/logviewerkeys"
    zk = KazooClient(hosts=f"127.0.0.1:{cluster.conf['storm.zookeeper.port']}",
                     auth_data=[("digest", f"{user}:{password}")])
    zk.start(timeout=15)
    planter = Ed25519PrivateKey.generate()
    other_ca, _ = Keyring.create()
    assert other_ca.ca_key_pem
    planted = logtokens.public_record(planter, other_ca.ca_key_pem)
    original, _stat = zk.get(path)
    logs = cluster.root / "logs"
    before = sum(p.read_text(errors="replace").count(planted["kid"]) for p in logs.glob("supervisor-*"))
    try:
        keys = json.loads(original)["keys"]
        zk.set(path, json.dumps({"keys": [planted, *keys]}).encode())
        # Both supervisors saw it, and said why they refused it
        poll_for(lambda: sum(p.read_text(errors="replace").count(planted["kid"])
                             for p in logs.glob("supervisor-*")) >= before + 2,
                 timeout=30, message="the supervisors to refuse the planted key")
        answer = get(cluster, bobs_log, logtokens.Minter(planter, 300, time.time).mint("admin", viewer).token)
        assert answer.status_code == 401 and "does not trust" in answer.json()["error"]
        assert get(cluster, bobs_log, minted(cluster, "bob", viewer)).status_code == 200  # nimbus's still is
    finally:
        zk.set(path, original)
        zk.stop()
        zk.close()


def test_another_users_token_reads_only_what_they_may(cluster: DevCluster, bobs_log: str) -> None:
    refused = get(cluster, bobs_log, minted(cluster, "carol", origin(bobs_log)))
    assert refused.status_code == 403 and "may not read the logs" in refused.json()["error"]
    assert get(cluster, bobs_log, minted(cluster, "admin", origin(bobs_log))).status_code == 200


# -- one user cannot hold every place ------------------------------------------------------------


def held_request(cluster: DevCluster, url: str, head: str, token: str) -> ssl.SSLSocket:
    """A request sent over TLS by a reader who then stops reading (a small receive buffer:
    what the server sends fills it, and the server waits)."""
    parts = urlsplit(url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(30)
    sock.connect((parts.hostname, parts.port))
    conn = context(cluster).wrap_socket(sock, server_hostname=parts.hostname)
    conn.sendall(f"{head}\r\nHost: {parts.netloc}\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
    return conn


def status_line(conn: ssl.SSLSocket) -> str:
    data = b""
    while b"\r\n" not in data:
        chunk = conn.recv(1)
        assert chunk, "closed before its answer"
        data += chunk
    return data.decode().strip()


def test_one_users_slow_downloads_cannot_fill_a_logviewer(cluster: DevCluster, bobs_log: str) -> None:
    viewer = origin(bobs_log)
    name = parse_qs(urlsplit(bobs_log).query)["file"][0]  # <topology id>/<port>/worker.log
    (live,) = list(cluster.root.glob(f"supervisor-*/workers-artifacts/{name}"))
    big = live.with_name("worker.log.1")
    with big.open("wb") as f:
        line = b"2026-11-26 a line of an old, long log, to keep a download busy\n"
        f.write(line * (BIG_LOG_BYTES // len(line)))
    download = f"{viewer}/api/v1/download?file={name}.1"
    held = []
    try:
        for _ in range(LOGVIEWER_PER_USER):
            conn = held_request(cluster, download, f"GET {download[len(viewer):]} HTTP/1.1",
                                minted(cluster, "bob", viewer))
            held.append(conn)
            assert status_line(conn).startswith("HTTP/1.1 200")
        # Bob holds all his places: the next is refused at once, however small
        started = time.monotonic()
        refused = get(cluster, bobs_log, minted(cluster, "bob", viewer))
        assert refused.status_code == 429 and "'bob'" in refused.json()["error"], refused.text
        assert time.monotonic() - started < 5
        # while another reader is served
        assert get(cluster, bobs_log, minted(cluster, "admin", viewer)).status_code == 200
    finally:
        for conn in held:
            conn.close()
        big.unlink()
    # Once his downloads are gone, bob is served again
    token = minted(cluster, "bob", viewer)
    poll_for(lambda: get(cluster, bobs_log, token).status_code == 200, timeout=30,
             message="bob's places given back")


def test_one_users_slow_requests_cannot_fill_nimbus(cluster: DevCluster) -> None:
    bob = token_of(cluster, "bob")
    summary = cluster.nimbus_url + "/api/v1/cluster/summary"
    held = []
    try:
        for _ in range(NIMBUS_PER_USER):  # each sends its headers, promises a body, and stops
            held.append(held_request(cluster, cluster.nimbus_url + "/api/v1/topologies",
                                     "POST /api/v1/topologies HTTP/1.1\r\nContent-Type: application/json\r\n"
                                     "Content-Length: 100", bob))
        # Nimbus holds them as they wait for their bodies: bob's next request is refused at once
        def refused_now() -> httpx.Response | None:
            answer = get(cluster, summary, bob)
            return answer if answer.status_code == 429 else None

        refused = poll_for(refused_now, timeout=20, message="bob's next request to be refused")
        assert "'bob'" in refused.json()["error"]
        # while another user is served
        assert get(cluster, summary, token_of(cluster, "carol")).status_code == 200
    finally:
        for conn in held:
            conn.close()
    poll_for(lambda: get(cluster, summary, bob).status_code == 200, timeout=30,
             message="bob's places at nimbus given back")
