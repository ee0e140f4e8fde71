"""Nimbus's package verification (squall.nimbus.package_verifier) with real sandboxes: what a
submitter is told, what only nimbus's log holds, a package that outlives its timeout,
the uid pool, and the modes (auto / required / off) where no sandbox works."""

from __future__ import annotations

import base64
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from squall import config as config_mod
from squall.cluster.state import ClusterState
from squall.cluster.zookeeper import DevZookeeper, start_client
from squall.errors import ConfigError, InvalidRequest, Refused, Unavailable
from squall.nimbus import package_verifier as verifier_mod
from squall.nimbus.control import TopologyControl
from squall.nimbus.package_verifier import Verifier
from squall.nimbus.submission import Submission
from squall.runtime import sandbox
from squall.testing import poll_for
from tests.helpers import keyring_conf, processes_marked, sleeper_source

REPO = Path(__file__).resolve().parents[2]
WORDCOUNT = (REPO / "examples" / "wordcount.py").read_text()
TIMEOUT_SECS = 3
UIDS = [65400, 65401]
OFF = "package verification off: {}; submitted code is checked by the client only"


def package(**files: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, text in files.items():
            zf.writestr(f"{name}.py", text)
    return buf.getvalue()


def definition(cls: str, name: str = "t") -> dict[str, Any]:
    return {"name": name, "config": {}, "components": [{
        "name": "split", "kind": "spout", "class": cls, "par": 1, "tasks": 1, "config": {},
        "streams": [{"name": "default", "fields": ["x"], "direct": False}], "inputs": [], "options": {}}]}


def make(**conf: Any) -> Verifier:
    return Verifier(config_mod.merge({"nimbus.verify.timeout.secs": TIMEOUT_SECS, "nimbus.verify.uids": UIDS,
                                      **{k.replace("_", "."): v for k, v in conf.items()}}))


@pytest.fixture
def verifier() -> Verifier:
    v = make()
    v.start()
    if v.off is not None:
        if os.environ.get("CI"):
            pytest.fail(f"no sandbox here: {v.off} (CI installs bubblewrap: ops/bootstrap.sh)")
        pytest.skip(f"no sandbox here: {v.off}")
    return v


def refused(v: Verifier, cls: str, blob: bytes) -> tuple[Refused, list[dict[str, Any]]]:
    with structlog.testing.capture_logs() as logs, pytest.raises(Refused) as caught:
        v.verify(definition(cls), blob)
    return caught.value, logs


def reference(message: str) -> str:
    assert "(nimbus log reference verify-" in message, message
    return message.rsplit("reference ", 1)[1].rstrip(")")


# -- what the submitter is told ----------------------------------------------------------


def test_a_package_that_loads_is_verified(verifier: Verifier) -> None:
    with structlog.testing.capture_logs() as logs:
        verifier.verify(definition("wordcount:RandomSentences"), package(wordcount=WORDCOUNT))
    assert [e["event"] for e in logs] == ["package verified"]


def test_a_streamparse_projects_package_is_verified_with_streamparse_importable(verifier: Verifier) -> None:
    # Given a package whose spout is written against streamparse (squall.compat.streamparse)
    words = "from streamparse import Spout\n\nclass Words(Spout):\n    outputs = ['x']\n"
    # Then the sandboxed import finds streamparse, as the topology's workers will
    with structlog.testing.capture_logs() as logs:
        verifier.verify(definition("words:Words"), package(words=words))
    assert [e["event"] for e in logs] == ["package verified"]


def test_an_exception_at_import_is_named_and_its_message_only_logged(verifier: Verifier) -> None:
    # Given a module that raises with something secret-looking in its message
    blob = package(wc="print('printed-by-the-package')\nraise ValueError('leaked-message-4711')\n")
    # When it is verified
    error, logs = refused(verifier, "wc:Split", blob)
    # Then the submitter learns the component, the module and the exception's type
    assert isinstance(error, InvalidRequest)  # the API answers 400
    assert str(error).startswith("topology t: component 'split': importing module 'wc' raised ValueError ")
    assert "leaked-message-4711" not in str(error) and "printed-by-the-package" not in str(error)
    # and nimbus's log holds the rest, under the answer's reference.
    (logged,) = [e for e in logs if e["event"] == "package refused"]
    assert logged["reference"] == reference(str(error))
    assert "ValueError: leaked-message-4711" in logged["output"]
    assert "printed-by-the-package" in logged["output"]


@pytest.mark.parametrize(("source", "told"), [
    ("import numpyx_not_here\n", "raised ModuleNotFoundError (no module 'numpyx_not_here')"),
    ("from squall.errors import TopologyValidationError\nraise TopologyValidationError('sq_secret_1')\n",
     "raised TopologyValidationError"),
    ("raise ImportError('sq_secret_1')\n", "raised ImportError"),
    ("import sys\nsys.stdout.write('sq_secret_1')\nclass Split: pass\n",
     "'wc:Split' is not a Spout subclass"),
    ("def __getattr__(name):\n    raise AttributeError('sq_secret_1')\n",
     "cannot load class 'wc:Split': AttributeError"),
    ("from squall.topology.loading import resolve_class\nresolve_class('sq_secret_1')\n",
     "raised TopologyValidationError"),
])
def test_only_squalls_own_words_reach_the_submitter(verifier: Verifier, source: str, told: str) -> None:
    error, _ = refused(verifier, "wc:Split", package(wc=source))
    assert told in str(error), str(error)
    assert "sq_secret_1" not in str(error)


def test_a_missing_class_or_module_is_said_as_squall_says_it(verifier: Verifier) -> None:
    error, _ = refused(verifier, "wordcount:NoSuchSpout", package(wordcount=WORDCOUNT))
    said = "cannot load class 'wordcount:NoSuchSpout': AttributeError (no attribute 'NoSuchSpout')"
    assert f"component 'split': {said}" in str(error)
    error, _ = refused(verifier, "absent:Spout", package(wordcount=WORDCOUNT))
    assert "importing module 'absent' raised ModuleNotFoundError (no module 'absent')" in str(error)


def test_code_that_exits_at_import_is_not_taken_for_verified(verifier: Verifier) -> None:
    for source in ("import os\nos._exit(0)\n", "import sys\nsys.exit(0)\n"):
        error, _ = refused(verifier, "wc:Split", package(wc=source))
        assert "before it reported success" in str(error), str(error)


def test_as_nimbus_own_user_the_import_runs_in_a_user_namespace(verifier: Verifier,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a nimbus that cannot switch users (not root)
    monkeypatch.setattr(verifier_mod, "can_switch_users", lambda: False)
    if sandbox.unavailable(None) is not None:
        pytest.skip(f"no user namespace here: {sandbox.unavailable(None)}")
    # Then a package that loads is verified
    verifier.verify(definition("wordcount:RandomSentences"), package(wordcount=WORDCOUNT))
    # and one that looks around runs as nimbus's user, alone, under the process limit set inside.
    source = ("import os, resource\n"
              "pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
              "nproc = resource.getrlimit(resource.RLIMIT_NPROC)\n"
              "raise OSError(f'uid={os.getuid()} pids={pids} nproc={nproc}')\n")
    _, logs = refused(verifier, "wc:Split", package(wc=source))
    (logged,) = [e for e in logs if e["event"] == "package refused"]
    # Alone: bwrap's init and itself, or itself only (bwrap --as-pid-1).
    assert any(f"uid={os.getuid()} pids={pids} " in logged["output"] for pids in ("[1, 2]", "[1]")), logged
    assert f"nproc=({verifier_mod.LIMITS.processes}, {verifier_mod.LIMITS.processes})" in logged["output"]


# -- the sandbox ends with the verification ------------------------------------------------


processes = processes_marked  # not all of the pool's uids: another nimbus may verify as one now


def verify_in_background(verifier: Verifier, marker: str,
                         name: str) -> tuple[threading.Thread, list[BaseException]]:
    """A verification of a package that leaves a sleeper (``marker``) and sleeps past the
    timeout, started on a thread; the refusal it ends with is appended to the list."""
    answers: list[BaseException] = []

    def verify() -> None:
        try:
            verifier.verify(definition("wc:Split"), package(wc=sleeper_source(marker)))
        except Refused as e:
            answers.append(e)

    thread = threading.Thread(target=verify, name=name)
    thread.start()
    return thread, answers


def test_a_timeout_kills_every_process_the_package_started(verifier: Verifier) -> None:
    # Given a package that leaves a sleeper in a session of its own, then sleeps itself
    marker = f"squall-sleeper-{os.urandom(4).hex()}"
    started = time.monotonic()
    thread, answers = verify_in_background(verifier, marker, "sleepy-verification")
    poll_for(lambda: processes(marker), timeout=30, message="the package's sleeper to start")
    # When its verification times out, it is refused saying so, in the time allowed
    thread.join(TIMEOUT_SECS + 30)
    assert len(answers) == 1 and f"did not finish in {TIMEOUT_SECS} s" in str(answers[0]), answers
    assert time.monotonic() - started < TIMEOUT_SECS + 10  # nimbus waited for nothing else
    # and nothing it started is left.
    poll_for(lambda: not processes(marker), timeout=10, message="the sandbox's processes to be gone")


def test_verifications_at_once_run_as_different_users_and_the_pool_caps_them(verifier: Verifier) -> None:
    if not sandbox.can_switch_users():
        pytest.skip("users are switched only as root")
    # Given one verification under way (a package that sleeps past the timeout)
    marker = f"squall-sleeper-{os.urandom(4).hex()}"
    thread, first = verify_in_background(verifier, marker, "slow-verification")
    try:
        poll_for(lambda: processes(marker), timeout=30, message="the first verification to run")
        # When another one runs meanwhile, it runs as the pool's next uid
        uid = package(wc="import os\nraise OSError(f'uid={os.getuid()}')\n")
        error, logs = refused(verifier, "wc:Split", uid)
        (logged,) = [e for e in logs if e["event"] == "package refused"]
        assert f"uid={UIDS[1]}" in logged["output"], logged["output"]
        # and with both uids taken, a third is turned away at once.
        held = verifier._take_uid()
        try:
            error, _ = refused(verifier, "wordcount:RandomSentences", package(wordcount=WORDCOUNT))
            assert isinstance(error, Unavailable) and "too many verifications at once" in str(error)  # 503
        finally:
            verifier._busy.discard(held)
    finally:
        thread.join(TIMEOUT_SECS + 30)
    assert first and "did not finish" in str(first[0])
    poll_for(lambda: not processes(marker), timeout=10, message="the sandbox's processes to be gone")


# -- where no sandbox works -----------------------------------------------------------------


def marking(marker: Path) -> str:
    return f"open({str(marker)!r}, 'w').write('imported')\n"


def test_the_marker_package_does_create_its_marker_when_imported(tmp_path: Path) -> None:
    # The control for the tests below: imported outside any sandbox, it leaves its file.
    marker = tmp_path / "imported"
    subprocess.run([sys.executable, "-c", marking(marker)], check=True, timeout=60)
    assert marker.exists()


def test_off_imports_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    v = make(nimbus_verify_sandbox="off")
    with structlog.testing.capture_logs() as logs:
        v.start()
        v.verify(definition("mark:Split"), package(mark=marking(marker)))
    assert not marker.exists()
    assert [e["event"] for e in logs] == [OFF.format("nimbus.verify.sandbox is off")]


def test_auto_without_a_sandbox_warns_once_and_imports_nothing(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verifier_mod, "unavailable", lambda identity=None: "bwrap is not installed (a test)")
    marker = tmp_path / "imported"
    v = make()
    with structlog.testing.capture_logs() as logs:
        v.start()
        v.start()
        v.verify(definition("mark:Split"), package(mark=marking(marker)))
        v.verify(definition("mark:Split"), package(mark=marking(marker)))
    assert not marker.exists()
    assert [e["event"] for e in logs] == [OFF.format("bwrap is not installed (a test)")]
    # A package that does not even unzip is still refused: that needs no import.
    with pytest.raises(InvalidRequest, match="the code package is refused"):
        v.verify(definition("mark:Split"), b"not a zip")


def test_required_without_a_sandbox_refuses_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verifier_mod, "unavailable", lambda identity=None: "bwrap is not installed (a test)")
    with pytest.raises(ConfigError, match="'required' and no sandbox works here: bwrap is not installed"):
        make(nimbus_verify_sandbox="required").start()
    with pytest.raises(ConfigError, match="must be one of auto, required, off"):
        make(nimbus_verify_sandbox="sometimes").start()
    with pytest.raises(ConfigError, match=r"nimbus\.verify\.uids"):
        make(nimbus_verify_uids=[65463, 65400]).start()


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="hiding bubblewrap from one process needs a mount namespace (root: CI)")
def test_a_nimbus_that_requires_a_sandbox_does_not_start_without_bwrap(tmp_path: Path) -> None:
    # Given a node whose bubblewrap is missing (hidden in a mount namespace of the test's: a
    # daemon finds its tools on a fixed path, never on the PATH it was started with)
    conf = tmp_path / "squall.yaml"
    conf.write_text(json.dumps({"squall.secure": False, "nimbus.http.port": 0, "storm.zookeeper.port": 1,
                                "nimbus.verify.sandbox": "required"}))
    nimbus = shlex.join([sys.executable, "-m", "squall.cli", "nimbus", "--config", str(conf)])
    hide = f"mount --bind /dev/null {shutil.which('bwrap') or '/usr/bin/bwrap'} && exec {nimbus}"
    # When nimbus starts
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", hide],
                          capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path)
    # Then it stops at once, saying why (before it connects to anything).
    assert proc.returncode == 1, proc.stdout + proc.stderr
    said = "nimbus.verify.sandbox is 'required' and no sandbox works here: bwrap is not installed"
    assert said in proc.stderr


@pytest.fixture
def submission(zookeeper: DevZookeeper, tmp_path: Path) -> Iterator[Submission]:
    conf = config_mod.merge({"storm.zookeeper.port": zookeeper.port, **keyring_conf(tmp_path),
                             "nimbus.verify.sandbox": "off"})
    client = start_client(conf)
    state = ClusterState(client, conf["storm.zookeeper.root"])
    state.setup()
    try:
        control = TopologyControl(state, conf)
        yield Submission(state, conf, control.reconcile, control.put_topology)
    finally:
        client.stop()
        client.close()


def test_a_nimbus_with_verification_off_takes_a_topology_without_running_its_code(
        submission: Submission, tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    submission.start()
    body = {"name": "marked", "conf": {}, "topology": definition("mark:Split", "marked"),
            "code": base64.b64encode(package(mark=marking(marker))).decode()}
    answer = submission.submit(body)
    assert answer["name"] == "marked"
    assert [r["name"] for r in submission.state.topologies()] == ["marked"]
    assert not marker.exists()
