"""The supervisor's logviewer: which names a request may ask for, pages and searches, rotation
and clean-up of the workers' logs (pure and on files), and the server itself over TLS with
the tokens nimbus mints for it (made here with the cluster keyring's key, on a clock the
test drives): who may read which log.  On a real cluster: tests/security/test_logviewer_tokens.py."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from squall import config
from squall.clock import FakeClock
from squall.security import logtokens, tls
from squall.security.keyring import Keyring
from squall.supervisor import logfiles, logrotation
from squall.supervisor.logfiles import BadLogRequest, LogDir
from squall.supervisor.logviewer import Logviewer

# -- names, pages, searches ----------------------------------------------------------------------


def test_a_request_names_a_workers_log_and_nothing_else() -> None:
    assert logfiles.worker_file("wc-3-1700000000/6700/worker.log") == logfiles.WorkerFile(
        "wc-3-1700000000", 6700, "worker.log")
    assert logfiles.worker_file("wc-3/6700/worker.log.2").name == "worker.log.2"
    assert logfiles.worker_file("wc-3/6700/events.log").name == "events.log"  # the event logger's
    assert logfiles.worker_file("wc-3/6700/events.log.1").name == "events.log.1"
    for bad in (None, "", "../../etc/passwd", "/etc/passwd", "wc/6700/../../../etc/passwd", "wc/x/worker.log",
                "wc/6700/readers.json", "wc/6700/worker.log/..", ".hidden/6700/worker.log", "wc/6700",
                "wc/6700/worker.log.0", "wc/6700/events.log/..", "wc/6700/other.log"):
        with pytest.raises(BadLogRequest):
            logfiles.worker_file(bad)
    assert logfiles.daemon_file("supervisor-0.log") == "supervisor-0.log"
    for bad in ("../nimbus.log", "logs/nimbus.log", "keyring.json", ".log", None):
        with pytest.raises(BadLogRequest):
            logfiles.daemon_file(bad)


def test_a_page_is_the_end_of_the_file_by_default_and_stays_inside_it() -> None:
    assert logfiles.page_bounds(100_000, None, None) == (100_000 - 51200, 100_000)
    assert logfiles.page_bounds(10, None, None) == (0, 10)
    assert logfiles.page_bounds(100, 90, 50) == (90, 100)
    assert logfiles.page_bounds(100, 500, 50) == (100, 100)
    assert logfiles.page_bounds(10**10, 0, 10**10) == (0, logfiles.MAX_PAGE_BYTES)
    with pytest.raises(BadLogRequest, match="negative"):
        logfiles.page_bounds(100, -1, 10)


def test_matches_carry_their_offset_and_context() -> None:
    data = b"a" * 200 + b"NEEDLE" + b"b" * 200 + b"NEEDLE"
    (first, second) = logfiles.find_matches(data, 1000, b"NEEDLE", 10, 0, len(data))
    assert first["byteOffset"] == 1200 and first["beforeString"] == "a" * 128
    assert first["afterString"] == "b" * 128 and second["byteOffset"] == 1406
    assert len(logfiles.find_matches(data, 0, b"NEEDLE", 1, 0, len(data))) == 1
    assert logfiles.find_matches(data, 0, b"NEEDLE", 10, 201, len(data))[0]["byteOffset"] == 406
    assert logfiles.grep_lines(b"x=1\nboom here\nx=2\n", b"boom") == b"boom here\n"


def test_rotated_files_go_oldest_first_and_stopped_workers_logs_by_age_then_size() -> None:
    assert logfiles.to_drop({1: 40, 2: 40, 3: 40}, 40, 100) == [3, 2]
    assert logfiles.to_drop({1: 10}, 40, 100) == []
    now = 10_000.0
    old = LogDir(Path("old"), now - 5000, 10, live=False)
    recent = LogDir(Path("recent"), now - 10, 50, live=False)
    live_old = LogDir(Path("live"), now - 9000, 60, live=True)
    dirs = [old, recent, live_old]
    assert logfiles.to_remove(dirs, now, age_secs=1000, sum_cap_bytes=1000) == [Path("old")]
    # over the node's total: the oldest stopped ones go too, never a live worker's
    assert logfiles.to_remove([old, recent, live_old], now, age_secs=10**6, sum_cap_bytes=70) == [
        Path("old"), Path("recent")]


# -- rotation and clean-up on files --------------------------------------------------------------


def test_a_worker_log_rotates_under_the_writer_and_keeps_within_its_cap(tmp_path: Path) -> None:
    # Given a worker's log, written through an O_APPEND descriptor as a worker's stdout is
    directory = tmp_path / "t-1" / "6700"
    directory.mkdir(parents=True)
    writer = os.open(directory / "worker.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(writer, b"first line\n" * 100)  # 1100 bytes
        assert not logrotation.rotate_if_due(directory, max_bytes=2000, cap_bytes=10_000)
        # When it passes the size, it is rotated: the old lines in worker.log.1, the file empty
        os.write(writer, b"second line\n" * 100)
        assert logrotation.rotate_if_due(directory, max_bytes=2000, cap_bytes=10_000)
        assert (directory / "worker.log.1").read_bytes() == b"first line\n" * 100 + b"second line\n" * 100
        assert (directory / "worker.log").stat().st_size == 0
        # And the worker's next line starts the file again (no hole where the old bytes were)
        os.write(writer, b"third\n")
        assert (directory / "worker.log").read_bytes() == b"third\n"
        # And past the worker's cap, the oldest rotated files go
        for _ in range(3):
            os.write(writer, b"x" * 2500)
            assert logrotation.rotate_if_due(directory, max_bytes=2000, cap_bytes=6000)
        assert sorted(p.name for p in directory.iterdir()) == ["worker.log", "worker.log.1", "worker.log.2"]
    finally:
        os.close(writer)


def test_the_events_log_rotates_on_its_own_as_the_worker_log_does(tmp_path: Path) -> None:
    directory = tmp_path / "t-1" / "6700"
    directory.mkdir(parents=True)
    (directory / "worker.log").write_bytes(b"w" * 3000)
    writer = os.open(directory / logfiles.EVENTS_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(writer, b"e\n" * 1500)
        assert logrotation.rotate_if_due(directory, 2000, 10_000, logfiles.EVENTS_LOG)
        assert (directory / "events.log.1").read_bytes() == b"e\n" * 1500
        assert (directory / "events.log").stat().st_size == 0
        assert (directory / "worker.log").stat().st_size == 3000 and not (directory / "worker.log.1").exists()
    finally:
        os.close(writer)


def test_stopped_workers_logs_are_removed_when_old_and_live_ones_kept(tmp_path: Path) -> None:
    base = tmp_path / logfiles.ARTIFACTS
    for topology, port in (("gone-1", 6700), ("live-1", 6701)):
        d = base / topology / str(port)
        d.mkdir(parents=True)
        (d / "worker.log").write_text("x\n")
        os.utime(d / "worker.log", (1000.0, 1000.0))
    removed = logrotation.clean_up(tmp_path, [("live-1", 6701)], now=1000.0 + 3600, age_secs=60,
                                   sum_cap_bytes=10**9)
    assert removed == [base / "gone-1" / "6700"]
    assert not (base / "gone-1").exists() and (base / "live-1" / "6701" / "worker.log").exists()


# -- the server ------------------------------------------------------------------------------------


TOPOLOGY = "wc-1-1700000000"


class Viewer:
    def __init__(self, root: Path, secure: bool) -> None:
        self.root = root
        self.tokens: dict[str, str] = {}
        conf: dict[str, Any] = {"storm.local.dir": str(root / "local"), "logviewer.port": 0,
                                "storm.log.dir": str(root / "daemon-logs"), "squall.secure": secure,
                                "logs.users": ["auditor"]}
        self.context = None
        self.clock = FakeClock(1_700_000_000.0)
        self.minter: logtokens.Minter | None = None
        if secure:
            cluster, admin = Keyring.create()
            self.tokens["admin"] = admin  # the users' own tokens: nimbus's business, refused here
            for user in ("bob", "carol", "auditor"):
                self.tokens[user] = cluster.add_user(user)
            cluster.supervisor_keyring().save(root / "supervisor-keyring.json")
            conf["squall.keyring.path"] = str(root / "supervisor-keyring.json")
            self.context = tls.client_context(ca_pem=cluster.ca_pem)
            assert cluster.ca_key_pem
            # What nimbus does: the key from the CA's, its record published for the logviewer
            key = logtokens.signing_key(cluster.ca_key_pem)
            self.minter = logtokens.Minter(key, 300, self.clock.now)
            self.key_record = logtokens.public_record(key, cluster.ca_key_pem)
        self.conf = config.merge(conf)
        local = Path(self.conf["storm.local.dir"])
        logs = logfiles.worker_dir(local, TOPOLOGY, 6700)
        logs.mkdir(parents=True)
        lines = [f"2026-11-26 line {i} component=split task=3\n" for i in range(5000)]
        lines[4000] = "Traceback (most recent call last):\nValueError: bad sentence 'x'\n"
        (logs / "worker.log").write_text("".join(lines))
        (logs / logfiles.READERS).write_text(json.dumps(logfiles.readers_record(
            TOPOLOGY, "wc", "bob", {"topology.users": [], "logs.users": []})))
        (root / "daemon-logs").mkdir()
        (root / "daemon-logs" / "supervisor-0.log").write_text("supervisor started\n")
        (root / "keyring.json").write_text("secret")
        self.viewer = Logviewer(self.conf, local, now=self.clock.now)
        if self.viewer.gate is not None:  # what the supervisor's ZooKeeper watch hands it
            self.viewer.gate.trust([self.key_record])
        self.viewer.start()
        # The server's thread for file reads starts with its first request: here, not in a test.
        assert self.get("/api/v1/listLogs", "admin" if secure else None).status_code == 200

    def mint(self, user: str, audience: str | None = None) -> str:
        assert self.minter is not None
        return self.minter.mint(user, audience or self.viewer.url).token

    def get(self, path: str, user: str | None = None, *, token: str | None = None,
            **headers: str) -> httpx.Response:
        """As ``user`` with a token minted for this logviewer, or with ``token`` as it is."""
        if user is not None:
            token = self.mint(user)
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        with httpx.Client(verify=self.context or True, timeout=30, trust_env=False) as client:
            return client.get(self.viewer.url + path, headers=headers)


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Viewer]:
    viewer = Viewer(tmp_path_factory.mktemp("logviewer"), secure=True)
    yield viewer
    viewer.viewer.stop()


LOG = f"/api/v1/log?file={TOPOLOGY}%2F6700%2Fworker.log"


def test_the_owner_reads_a_page_of_the_log_over_tls(secure: Viewer) -> None:
    assert secure.viewer.url.startswith("https://")
    answer = secure.get(LOG, "bob")
    assert answer.status_code == 200, answer.text
    size = int(answer.headers["X-Log-Size"])
    assert int(answer.headers["X-Log-Start"]) == size - 51200 and int(answer.headers["X-Log-End"]) == size
    assert answer.text.endswith("line 4999 component=split task=3\n")
    first = secure.get(LOG + "&start=0&length=40", "bob")
    assert first.text == "2026-11-26 line 0 component=split task=3"[:40]
    grep = secure.get(LOG + "&start=0&length=10000000&grep=ValueError", "bob")
    assert grep.text == "ValueError: bad sentence 'x'\n"
    whole = secure.get(f"/api/v1/download?file={TOPOLOGY}%2F6700%2Fworker.log", "bob")
    assert len(whole.content) == size
    assert f"{TOPOLOGY}-6700-worker.log" in whole.headers["content-disposition"]


def test_only_the_owner_admins_and_logs_users_read_it(secure: Viewer) -> None:
    assert secure.get(LOG).status_code == 401
    refused = secure.get(LOG, "carol")
    assert refused.status_code == 403 and "may not read the logs of topology 'wc'" in refused.json()["error"]
    assert secure.get(LOG, "admin").status_code == 200
    assert secure.get(LOG, "auditor").status_code == 200  # logs.users
    assert secure.get("/api/v1/listLogs", "bob").json() == [f"{TOPOLOGY}/6700/worker.log"]
    assert secure.get("/api/v1/listLogs", "carol").json() == []
    # The daemons' logs: admins and logs.users only
    assert secure.get("/api/v1/daemonlog?file=supervisor-0.log", "bob").status_code == 403
    assert secure.get("/api/v1/daemonlog?file=supervisor-0.log", "admin").text == "supervisor started\n"


def test_a_users_own_token_another_logviewers_or_an_expired_one_is_refused(secure: Viewer) -> None:
    # (a user's token sent to a logviewer could be taken there by whoever runs code beside it)
    own = secure.get(LOG, token=secure.tokens["admin"])
    assert own.status_code == 401 and "only the tokens nimbus mints" in own.json()["error"]
    other = secure.get(LOG, token=secure.mint("bob", "https://10.9.9.9:8000"))
    assert other.status_code == 401 and "another logviewer" in other.json()["error"]
    token = secure.mint("bob")
    assert secure.get(LOG, token=token).status_code == 200
    secure.clock.advance(299)
    assert secure.get(LOG, token=token).status_code == 200
    secure.clock.advance(1)
    expired = secure.get(LOG, token=token)
    assert expired.status_code == 401 and "expired" in expired.json()["error"]
    assert secure.get(LOG, "bob").status_code == 200  # a new one reads again


def test_until_nimbus_published_a_key_no_token_is_taken(tmp_path: Path) -> None:
    viewer = Viewer(tmp_path, secure=True)
    try:
        assert viewer.viewer.gate is not None
        viewer.viewer.gate.trust([])
        answer = viewer.get(LOG, "bob")
        assert answer.status_code == 503 and "no key from nimbus" in answer.json()["error"]
    finally:
        viewer.viewer.stop()


def test_no_request_reaches_a_file_that_is_not_a_log(secure: Viewer) -> None:
    for bad in ("../../keyring.json", f"{TOPOLOGY}/6700/readers.json", "/etc/passwd",
                f"{TOPOLOGY}/6700/..%2F..%2F..%2Fkeyring.json"):
        answer = secure.get(f"/api/v1/log?file={bad}", "admin")
        assert answer.status_code == 400, bad
        assert "not a worker's log" in answer.json()["error"]
    assert secure.get("/api/v1/daemonlog?file=..%2Fkeyring.json", "admin").status_code == 400
    assert secure.get(f"/api/v1/log?file={TOPOLOGY}%2F6701%2Fworker.log", "admin").status_code == 404
    # A link planted where a log would be is not followed
    local = Path(secure.conf["storm.local.dir"])
    planted = logfiles.worker_dir(local, TOPOLOGY, 6700) / "worker.log.1"
    planted.symlink_to(secure.root / "keyring.json")
    try:
        assert secure.get(f"/api/v1/log?file={TOPOLOGY}%2F6700%2Fworker.log.1", "admin").status_code == 404
    finally:
        planted.unlink()
    assert secure.get(LOG + "&start=abc", "bob").json()["error"].startswith("start must be a whole number")


def test_search_answers_in_storms_shape(secure: Viewer) -> None:
    search = f"/api/v1/search?file={TOPOLOGY}%2F6700%2Fworker.log&search-string=line+42+"
    answer = secure.get(search + "&num-matches=1", "bob").json()
    (match,) = answer["matches"]
    text = secure.get(LOG + "&start=0&length=10000000", "bob").text
    assert match["byteOffset"] == text.encode().index(b"line 42 ") and match["matchString"] == "line 42 "
    assert match["afterString"].startswith("component=split")
    assert answer["nextByteOffset"] == match["byteOffset"] + len("line 42 ")
    again = secure.get(f"/api/v1/search?file={TOPOLOGY}%2F6700%2Fworker.log&search-string=line+42+"
                       f"&start-byte-offset={answer['nextByteOffset']}", "bob").json()
    assert again["matches"] == []
    assert secure.get(f"/api/v1/search?file={TOPOLOGY}%2F6700%2Fworker.log&search-string=line+42+", "carol"
                      ).status_code == 403


def test_a_browser_following_a_log_link_gets_the_log_page(secure: Viewer) -> None:
    page = secure.get(LOG, Accept="text/html,application/xhtml+xml")
    assert page.status_code == 200 and "<title>Log - Squall logviewer</title>" in page.text
    assert secure.get("/ui/log.js").status_code == 200


def test_an_insecure_cluster_serves_logs_over_http_to_anyone(tmp_path: Path) -> None:
    viewer = Viewer(tmp_path, secure=False)
    try:
        assert viewer.viewer.url.startswith("http://")
        assert viewer.get(LOG).text.endswith("line 4999 component=split task=3\n")
    finally:
        viewer.viewer.stop()
