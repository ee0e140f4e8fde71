"""What a supervisor gives the workers it launches: an allow-listed
environment, the topology's secrets in a 0600 file (or no launch at all),
and files only its user can read."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from squall import config as config_mod
from squall.cluster.state import ClusterState
from squall.cluster.zookeeper import DevZookeeper, start_client
from squall.errors import SquallError, TopologyValidationError
from squall.runtime.ports import free_port
from squall.security.keyring import Keyring
from squall.supervisor import launcher, run_as, workers
from squall.supervisor.daemon import Supervisor
from squall.supervisor.launcher import worker_env
from squall.supervisor.localizer import worker_secrets
from squall.supervisor.workers import write_json

CURVE = {"public": "cHVibGlj", "secret": "c2VjcmV0"}


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# -- pure pieces ------------------------------------------------------------------


def test_the_worker_env_is_an_allow_list_plus_the_topologys_plus_squalls() -> None:
    supervisor_env = {"PATH": "/usr/bin", "HOME": "/home/storm", "AWS_SECRET_ACCESS_KEY": "leak",
                      "SQUALL_KEYRING": "/etc/squall/keyring.json", "SQUALL_NODE": "spoofed"}
    env = worker_env(supervisor_env, ["PATH", "HOME", "LANG"],
                     {"PATH": "/opt/bin:/usr/bin", "MY_SETTING": 42, "SQUALL_NODE": "evil", "BAD=NAME": "x",
                      "": "empty"},
                     {"SQUALL_NODE": "node-1"})
    assert env == {"PATH": "/opt/bin:/usr/bin", "HOME": "/home/storm", "MY_SETTING": "42",
                   "SQUALL_NODE": "node-1"}
    assert worker_env(supervisor_env, [], None, {"SQUALL_NODE": "n"}) == {"SQUALL_NODE": "n"}


def test_worker_secrets_carry_the_curve_keys_and_every_zookeeper_password() -> None:
    credentials = [("squall", "new"), ("squall", "old")]
    assert worker_secrets("t-1", {"curve": CURVE, "other": 1}, credentials) == {
        "curve": CURVE, "zookeeper": {"user": "squall", "passwords": ["new", "old"]}}
    # and the topology's DRPC credential, with the CA its servers' certificates are signed by
    drpc = {"token": "sqd_t-1.secret", "ca": "PEM"}
    assert worker_secrets("t-1", {"curve": CURVE, "drpc": drpc}, credentials)["drpc"] == drpc
    for missing in (None, {}, {"curve": {"public": "p"}}, {"curve": "x"}):
        with pytest.raises(SquallError, match="t-1 has no CURVE keypair in ZooKeeper"):
            worker_secrets("t-1", missing, credentials)


def test_write_json_is_0600_even_over_a_leftover_temporary_file(tmp_path: Path) -> None:
    leftover = tmp_path / "secrets.json.tmp"
    leftover.write_text("{}")
    os.chmod(leftover, 0o644)
    write_json(tmp_path / "secrets.json", {"k": "v"})
    assert mode(tmp_path / "secrets.json") == 0o600
    assert not leftover.exists()


# -- the supervisor's shell, with a fake ZooKeeper state and no real worker -------------


class FakeState:
    def __init__(self, node: str, port: int, secrets: Any) -> None:
        self.node, self.port, self.secrets = node, port, secrets
        self.errors: list[tuple[str, dict[str, Any]]] = []
        self.moved = False  # nimbus moved the worker to another node

    def assignments(self) -> dict[str, Any]:
        node = "elsewhere" if self.moved else self.node
        return {"t-1": {"workers": [{"node": node, "port": self.port, "executors": [[1, 1]]}],
                        "hosts": {node: "127.0.0.1"}, "active": True, "version": 2 if self.moved else 1}}

    def assignment(self, topology_id: str) -> dict[str, Any] | None:
        return self.assignments().get(topology_id)

    def topology(self, topology_id: str) -> dict[str, Any]:
        return {"id": topology_id, "name": "t", "definition": {}, "owner": "alice",
                # (a record from before admission: keys and names it refuses now are dropped again)
                "conf": {"topology.environment": {"MY_SETTING": "on", "LD_PRELOAD": "/tmp/evil.so"},
                         "squall.secure": False, "transactional.zookeeper.root": "/squall",
                         "topology.users": ["bob"], "logs.users": ["carol"]}}

    def topology_secrets(self, topology_id: str) -> Any:
        return self.secrets

    def code(self, topology_id: str) -> bytes | None:
        return None

    def add_error(self, topology_id: str, error: dict[str, Any]) -> None:
        self.errors.append((topology_id, error))

    def log_levels(self, topology_id: str) -> dict[str, Any]:
        return {}

    def watch_log_levels(self, topology_id: str, on_change: Any) -> Any:
        return SimpleNamespace(stop=lambda: None)

    def debug_options(self, topology_id: str) -> dict[str, Any]:
        return {}

    def watch_debug_options(self, topology_id: str, on_change: Any) -> Any:
        return SimpleNamespace(stop=lambda: None)


REAL_POPEN = subprocess.Popen


class FakePopen:
    """Records how the worker was launched; runs a sleeper in its place."""

    launched: list[FakePopen] = []

    def __init__(self, args: list[str], **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs
        self.sleeper = REAL_POPEN([sys.executable, "-c", "import time; time.sleep(60)"],
                                  start_new_session=True)
        self.pid = self.sleeper.pid
        FakePopen.launched.append(self)

    def poll(self) -> int | None:
        return self.sleeper.poll()


@pytest.fixture
def fake_popen(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FakePopen]]:
    FakePopen.launched = []
    monkeypatch.setattr(launcher.subprocess, "Popen", FakePopen)
    yield FakePopen.launched
    for fake in FakePopen.launched:
        fake.sleeper.kill()
        fake.sleeper.wait(10)


@pytest.fixture
def keyring(tmp_path: Path) -> Keyring:
    keyring, _token = Keyring.create()
    keyring.rotate_zookeeper()
    keyring.save(tmp_path / "keyring.json")
    return keyring


def pinned_to_first_core() -> dict[str, str]:
    """The core a supervisor's only slot pins its worker to (none on a one-core machine)."""
    cores = os.sched_getaffinity(0)
    return {"SQUALL_WORKER_CPU": str(min(cores))} if len(cores) > 1 else {}


def test_workers_are_pinned_to_the_supervisors_cores_slot_by_slot(tmp_path: Path) -> None:
    sup = Supervisor(config_mod.merge({"storm.local.dir": str(tmp_path / "local"), "squall.secure": False,
                                       "supervisor.slots.ports": [6703, 6701, 6702],
                                       "supervisor.cpu.cores": [4, 5]}))
    assert [sup.launcher.worker_cpu(p) for p in (6701, 6702, 6703, 9999)] == [4, 5, 4, None]
    off = Supervisor(config_mod.merge({"storm.local.dir": str(tmp_path / "off"), "squall.secure": False,
                                       "supervisor.worker.cpu.affinity": False}))
    assert off.launcher.worker_cpu(6700) is None


def supervisor(tmp_path: Path, secrets: Any, **conf: Any) -> tuple[Supervisor, FakeState, int]:
    port = free_port()
    sup = Supervisor(config_mod.merge({"storm.local.dir": str(tmp_path / "local"),
                                       "supervisor.slots.ports": [port],
                                       "supervisor.worker.env.allow": ["PATH"], **conf}))
    sup.state = sup.assignments.state = state = FakeState(sup.node, port, secrets)  # type: ignore[assignment]
    return sup, state, port


def test_the_supervisor_rotates_a_running_workers_log_past_its_size(tmp_path: Path, keyring: Keyring,
                                                                    fake_popen: list[FakePopen]) -> None:
    # Given a supervisor whose workers' logs rotate past 1 KiB, and its worker launched
    sup, _, port = supervisor(tmp_path, {"curve": CURVE}, **{"squall.keyring.path": str(keyring.path),
                                                            "supervisor.worker.log.max.bytes": 1024})
    sup.sync_assignments()
    sup.sync_processes()
    log = sup.local_dir / "workers-artifacts" / "t-1" / str(port) / "worker.log"
    # When the worker has written past it
    with open(log, "ab") as f:
        f.write(b"x" * 2000)
    # Then the next round of the supervisor's loop rotates it
    sup.sync_processes()
    assert (log.parent / "worker.log.1").stat().st_size == 2000 and log.stat().st_size == 0


def test_a_secure_supervisor_writes_the_workers_secrets_and_env(tmp_path: Path, keyring: Keyring,
                                                                fake_popen: list[FakePopen]) -> None:
    # Given a secure supervisor and a topology with its CURVE keys in ZooKeeper
    sup, _, port = supervisor(tmp_path, {"curve": CURVE}, **{"squall.keyring.path": str(keyring.path)})
    # When it syncs and launches the worker
    sup.sync_assignments()
    sup.sync_processes()
    # Then the worker's secrets file is 0600 and holds the keys and every ZooKeeper password
    slot = sup.launcher.slots[port]
    assert mode(slot.secrets_file) == 0o600
    assert json.loads(slot.secrets_file.read_text()) == {
        "curve": CURVE, "zookeeper": {"user": "squall",
                                      "passwords": [p for _, p in keyring.zookeeper_credentials()]}}
    assert len(keyring.zookeeper_credentials()) == 2
    # And the worker gets the allow-list, the topology's environment, its node and its core, nothing else
    (proc,) = fake_popen
    assert proc.kwargs["env"] == {"PATH": os.environ["PATH"], "MY_SETTING": "on", "SQUALL_NODE": sup.node,
                                  **pinned_to_first_core()}
    assert proc.kwargs["umask"] == 0o077
    # And its files are this user's only; the topology cannot turn security off for its workers
    logs = sup.local_dir / "workers-artifacts" / "t-1" / str(port)
    assert mode(slot.dir) == 0o700 and mode(logs / "worker.log") == 0o600 and mode(logs.parent) == 0o700
    # And beside its log, who may read it (the logviewer asks, even once the topology is gone)
    assert mode(logs / "readers.json") == 0o600
    assert json.loads((logs / "readers.json").read_text()) == {
        "topology_id": "t-1", "topology": "t", "owner": "alice", "users": ["bob", "carol"]}
    assert mode(slot.assignment_file) == 0o600
    assert mode(sup.local_dir) == 0o700 and mode(sup.local_dir / "node-id") == 0o600
    assert json.loads(slot.assignment_file.read_text())["conf"]["squall.secure"] is True
    assert "transactional.zookeeper.root" not in json.loads(slot.assignment_file.read_text())["conf"]
    # And killing the worker removes its secrets
    slot.kill("test", 0.0)
    assert fake_popen[0].sleeper.wait(10) is not None
    assert not slot.secrets_file.exists()


def test_a_secure_supervisor_refuses_a_topology_without_curve_keys(tmp_path: Path, keyring: Keyring,
                                                                   fake_popen: list[FakePopen]) -> None:
    sup, state, port = supervisor(tmp_path, None, **{"squall.keyring.path": str(keyring.path)})
    sup.sync_assignments()
    sup.sync_processes()
    sup.sync_assignments()
    assert fake_popen == []
    assert not sup.launcher.slots[port].secrets_file.exists()
    ((topology_id, error),) = state.errors  # said once
    assert topology_id == "t-1" and error["component"] == "__supervisor"
    assert "t-1 has no CURVE keypair in ZooKeeper" in error["error"]
    # Until nimbus wrote the keys
    state.secrets = {"curve": CURVE}
    sup.sync_assignments()
    sup.sync_processes()
    assert len(fake_popen) == 1 and sup.launcher.slots[port].secrets_file.exists()


def test_an_insecure_supervisor_writes_no_secrets(tmp_path: Path, fake_popen: list[FakePopen]) -> None:
    sup, _, port = supervisor(tmp_path, None, **{"squall.secure": False,
                                                 "squall.keyring.path": str(tmp_path / "none.json")})
    sup.sync_assignments()
    sup.sync_processes()
    assert len(fake_popen) == 1 and not sup.launcher.slots[port].secrets_file.exists()
    assert fake_popen[0].kwargs["env"] == {"PATH": os.environ["PATH"], "MY_SETTING": "on",
                                           "SQUALL_NODE": sup.node, **pinned_to_first_core()}
    assert json.loads(sup.launcher.slots[port].assignment_file.read_text())["conf"]["squall.secure"] is False


def test_a_dead_worker_whose_slot_moved_since_the_last_sync_is_not_relaunched(
        tmp_path: Path, fake_popen: list[FakePopen]) -> None:
    # Given a supervisor running its worker
    sup, state, _port = supervisor(tmp_path, None, **{"squall.secure": False,
                                                      "squall.keyring.path": str(tmp_path / "none.json")})
    sup.sync_assignments()
    sup.sync_processes()
    assert len(fake_popen) == 1
    # When the worker dies and nimbus moves its executors to another node before this
    # supervisor's next assignment sync
    fake_popen[0].sleeper.kill()
    fake_popen[0].sleeper.wait(10)
    state.moved = True
    sup.sync_processes()
    # Then the worker is not relaunched from the stale assignment (it would run beside its
    # replacement), and the next sync finds nothing to run here
    assert len(fake_popen) == 1
    sup.sync_assignments()
    sup.sync_processes()
    assert len(fake_popen) == 1 and sup.assignments.desired == {}
    # while a worker that dies with its slot still assigned is relaunched at once
    state.moved = False
    sup.sync_assignments()
    sup.sync_processes()
    assert len(fake_popen) == 2


# -- a real supervisor on a real (secure) ZooKeeper -------------------------------


def test_a_running_supervisor_creates_files_for_its_user_only(tmp_path: Path, keyring: Keyring,
                                                              zookeeper: DevZookeeper) -> None:
    conf = config_mod.merge({"storm.zookeeper.port": zookeeper.port, "squall.keyring.path": str(keyring.path),
                             "storm.local.dir": str(tmp_path / "local"),
                             "supervisor.slots.ports": [free_port()]})
    before = os.umask(0o022)
    os.umask(before)
    sup = Supervisor(conf)
    try:
        # When the supervisor runs
        sup.start()
        # Then what this process creates is 0600 / 0700
        created = tmp_path / "local" / "some-file"
        created.write_text("x")
        (tmp_path / "local" / "some-dir").mkdir()
        assert mode(created) == 0o600 and mode(tmp_path / "local" / "some-dir") == 0o700
        assert mode(sup.local_dir / "workers") == 0o700 and mode(sup.local_dir / "code") == 0o700
        # And it registered in ZooKeeper, with the keyring's credentials
        observer = start_client(conf)
        try:
            assert sup.node in ClusterState(observer, conf["storm.zookeeper.root"]).supervisors()
        finally:
            observer.stop()
            observer.close()
    finally:
        sup.stop()
    # And a stopped supervisor gives the process its umask back
    now = os.umask(before)
    assert now == before


# -- workers as their topology's own user (issue 29) ------------------------------


def test_workers_as_their_own_user_asked_for_and_impossible_refuse_to_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from squall.errors import ConfigError
    from squall.runtime import sandbox

    monkeypatch.setattr(sandbox, "unavailable", lambda identity=None: "bwrap is not installed")
    base = {"storm.local.dir": str(tmp_path / "local"), "squall.secure": False}
    required = Supervisor(config_mod.merge({**base, "supervisor.run.worker.as.user": True}))
    with pytest.raises(ConfigError, match="bwrap is not installed"):
        required.launcher.run_as.decide()
    # the default: said, not refused
    assert Supervisor(config_mod.merge(base)).launcher.run_as.decide() is False
    sharing = Supervisor(config_mod.merge({**base, "supervisor.worker.shared.dirs": [str(tmp_path)]}))
    with pytest.raises(ConfigError, match=r"holds storm\.local\.dir"):
        sharing.launcher.run_as.decide()


def test_a_sandboxed_topologys_state_directory_is_its_owners_and_named_after_its_definition(
        tmp_path: Path) -> None:
    # Given a supervisor that runs workers as their topology's own user
    local = tmp_path / "local"
    local.mkdir()
    sup = Supervisor(config_mod.merge({"storm.local.dir": str(local), "squall.secure": False}))
    sup.launcher.run_as.enabled = True
    # When one definition of alice's runs as "wc", then again as "wc-2" (a new topology id, a new uid)
    first = sup.launcher.run_as.for_topology("wc-1-100", {"name": "WordCount"}, "alice")
    second = sup.launcher.run_as.for_topology("wc-2-200", {"name": "WordCount"}, "alice")
    # Then both get the definition's state directory, where the second finds the
    # first's SQLite state (checkpointed state is keyed by the definition's name)
    assert first is not None and second is not None
    assert first.state_dir == second.state_dir == local / "state" / "alice" / "WordCount"
    assert first.identity != second.identity
    # and bob's topology of the same class name gets a directory of its own
    bobs = sup.launcher.run_as.for_topology("wc-3-300", {"name": "WordCount"}, "bob")
    assert bobs is not None and bobs.state_dir == local / "state" / "bob" / "WordCount"
    # and a name that is a path is refused before any directory is made of it
    for name, owner in (("../../../etc", "alice"), ("WordCount", "../root"), (".", "alice")):
        with pytest.raises(TopologyValidationError, match="must be 1-128 letters"):
            sup.launcher.run_as.for_topology("wc-4-400", {"name": name}, owner)


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root (CI runs as root)")
def test_a_sandboxed_worker_owns_its_files_and_not_the_supervisors(tmp_path: Path) -> None:
    from squall.runtime import sandbox

    if sandbox.unavailable(sandbox.Identity(61300, 61300)) is not None:
        pytest.fail(f"no sandbox here: {sandbox.unavailable(sandbox.Identity(61300, 61300))}")
    local = tmp_path / "local"
    slot = launcher.Slot(6700, local / "workers" / "6700")
    as_user = run_as.RunAs(sandbox.Identity(61300, 61300), local / "state" / "t")
    children: dict[int, Any] = {}
    # (an assignment the worker refuses: it starts, writes its error as its own user, exits)
    pid = slot.launch("node", {"topology_id": "t-1", "topology": {}, "conf": {}}, children,
                      secrets={"curve": CURVE, "zookeeper": None}, run_as=as_user)
    try:
        errors = slot.dir / "errors.jsonl"
        from squall.testing import poll_for

        poll_for(errors.exists, timeout=30, message="the worker's own error file")
        assert os.stat(errors).st_uid == 61300
        assert (os.stat(slot.dir).st_uid, os.stat(slot.dir).st_gid, mode(slot.dir)) == (0, 61300, 0o1770)
        assert (os.stat(slot.assignment_file).st_uid, mode(slot.assignment_file)) == (0, 0o640)
        assert (os.stat(slot.secrets_file).st_uid, mode(slot.secrets_file)) == (61300, 0o600)
        assert os.stat(slot.dir / "pid").st_uid == 0 and os.stat(as_user.state_dir).st_uid == 61300
        assert slot.pid_record()["pid"] == pid and slot.pid_record()["sandboxed"] is True
        # A link the worker plants where the supervisor reads is not followed (it could
        # name the supervisor's keyring, whose content would go to ZooKeeper as a heartbeat).
        keyring = tmp_path / "keyring.json"
        keyring.write_text(json.dumps({"topology_id": "t-1", "stolen": True}))
        (slot.dir / "heartbeat.json").symlink_to(keyring)
        assert slot.heartbeat() is None
        os.link(keyring, slot.dir / "errors-link")  # a second name: refused too
        assert workers.read_worker_file(slot.dir / "errors-link") is None
    finally:
        slot.kill("test", grace=1.0)
        for child in children.values():
            child.wait(10)


def test_a_workers_error_lines_are_cut_to_their_fields_and_its_own_topology() -> None:
    # (a worker's errors.jsonl is written by user code too: it must not speak for another
    # topology, or put a megabyte in ZooKeeper)
    raw = {"topology_id": "victim-1", "component": "split", "task": 3, "error": "ValueError: x",
           "trace": "T" * 100_000, "fatal": "yes", "time": 12.5, "extra": {"huge": "x" * 10}}
    record = workers.error_record(raw, "mine-1", "node-a", 6700)
    assert record is not None
    assert record["topology_id"] == "mine-1" and (record["node"], record["port"]) == ("node-a", 6700)
    assert len(record["trace"]) == workers.ERROR_FIELDS["trace"] and "extra" not in record
    assert (record["task"], record["time"], record["fatal"]) == (3, 12.5, False)
    assert workers.error_record(["not", "a", "record"], "mine-1", "n", 1) is None
    assert workers.error_record({"task": True, "time": "soon"}, "mine-1", "n", 1)["task"] is None


def test_an_endless_error_line_is_skipped_not_waited_for(tmp_path: Path) -> None:
    slot = launcher.Slot(6700, tmp_path)
    (tmp_path / "errors.jsonl").write_bytes(b"x" * (workers.ERRORS_READ_MAX + 10) + b"\n"
                                            + json.dumps({"error": "E: after"}).encode() + b"\n")
    offset, seen = 0, []
    for _ in range(4):
        errors, offset = slot.new_errors(offset)
        seen += errors
    assert seen == [{"error": "E: after"}]


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root (CI runs as root)")
def test_handing_state_over_never_follows_a_link_or_a_second_name(tmp_path: Path) -> None:
    from squall.supervisor.run_as import hand_over

    # Given a state directory a worker filled with links out of it, and a second name of a file
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("root's")
    state = tmp_path / "state"
    (state / "sub").mkdir(parents=True)
    (state / "sub" / "data").write_text("x")
    (state / "to-dir").symlink_to(outside)
    (state / "to-file").symlink_to(outside / "secret")
    os.link(outside / "secret", state / "second-name")
    # When the supervisor hands it to the topology's uid
    hand_over(state, 61999, 61999)
    # Then what is the state's is the uid's, and nothing outside (or reached by a link) changed
    assert {os.lstat(p).st_uid for p in (state, state / "sub", state / "sub" / "data")} == {61999}
    assert os.stat(outside).st_uid == os.stat(outside / "secret").st_uid == os.getuid()
