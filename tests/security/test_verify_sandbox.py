"""A submitter's package against a real secure dev cluster's nimbus, which imports it to
verify it: code that spies on nimbus at import finds nothing to read and tells the
submitter nothing; a sleeper it leaves is killed with its sandbox; an exception's message
stays in nimbus's log.  (The finding: package code read /proc/<ppid>/cmdline, followed
--config to the keyring and printed the admin token into the 400 answer.)"""

from __future__ import annotations

import base64
import io
import json
import os
import threading
import zipfile
from collections.abc import Iterator
from typing import Any

import pytest

from squall.cli.devcluster import DevCluster
from squall.runtime import sandbox
from squall.security.keyring import Keyring
from squall.testing import poll_for
from tests.helpers import processes_marked, sleeper_source

TIMEOUT_SECS = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    why = sandbox.unavailable(sandbox.Identity(65400, 65400) if sandbox.can_switch_users() else None)
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"no sandbox here: {why} (CI installs bubblewrap: ops/bootstrap.sh)")
        pytest.skip(f"no sandbox here: {why}")
    c = DevCluster(tmp_path_factory.mktemp("verify") / "c", supervisors=0,
                   conf={"nimbus.verify.timeout.secs": TIMEOUT_SECS})
    try:
        c.start()
        yield c
    finally:
        c.stop()


def submit(cluster: DevCluster, name: str, source: str) -> tuple[int, Any, str]:
    """(status, answer, the answer's raw text) for a one-module package whose spout is ``spy:Spout``."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("spy.py", source)
    body = {"name": name, "conf": {}, "code": base64.b64encode(buf.getvalue()).decode(),
            "topology": {"name": name, "config": {}, "components": [{
                "name": "spy", "kind": "spout", "class": "spy:Spout", "par": 1, "tasks": 1, "config": {},
                "streams": [{"name": "default", "fields": ["x"], "direct": False}], "inputs": [],
                "options": {}}]}}
    response = cluster.request("POST", "/api/v1/topologies", json.dumps(body).encode(), timeout=120)
    return response.status_code, json.loads(response.content or b"null"), response.text


def nimbus_log(cluster: DevCluster) -> str:
    return (cluster.root / "logs" / "nimbus-0.log").read_text(errors="replace")


def secrets_of(cluster: DevCluster) -> list[str]:
    """What the package must not learn: the admin's token, ZooKeeper's passwords, nimbus's TLS key."""
    keyring = Keyring.load(cluster.keyring_file)
    key_body = "".join(keyring.data["tls"]["key"].splitlines()[1:-1])
    return [keyring.client_token or "", *(p for _, p in keyring.zookeeper_credentials()), key_body[20:60]]


def spy(cluster: DevCluster, refuse: bool) -> str:
    """A module that, at import, reads what nimbus keeps and tells it every way it can."""
    targets = {"keyring": str(cluster.keyring_file), "conf": str(cluster.root / "nimbus-0.yaml"),
               "cmdline": f"/proc/{cluster.procs['nimbus-0'].pid}/cmdline",
               "environ": f"/proc/{cluster.procs['nimbus-0'].pid}/environ"}
    return f"""
import os, re
found = []
def read(label, path):
    try:
        with open(path, "rb") as f:
            data = f.read().decode("utf-8", "replace")
    except OSError as e:
        found.append(f"READ {{label}} FAILED {{type(e).__name__}}")
        return ""
    found.append(f"READ {{label}} OK {{data!r}}")
    return data
for label, path in {targets!r}.items():
    read(label, path)
# The finding's way: the parent's command line, its --config, the keyring the config names.
args = read("parent-cmdline", f"/proc/{{os.getppid()}}/cmdline").split("\\0")
if "--config" in args:
    conf = read("parent-config", args[args.index("--config") + 1])
    for path in re.findall(r"squall.keyring.path: (\\S+)", conf):
        read("parent-keyring", path)
print("\\n".join(found))
if {refuse!r}:
    raise ValueError(" | ".join(found))
from squall.topology.component import Spout as _Base
class Spout(_Base):
    pass
"""


@pytest.mark.parametrize("refuse", [True, False], ids=["raises", "loads"])
def test_a_package_that_spies_on_nimbus_learns_and_tells_nothing(cluster: DevCluster, refuse: bool) -> None:
    name = f"spy{int(refuse)}"
    # Given a package that reads nimbus's keyring, config, command line and environment at import
    # When it is submitted
    status, answer, text = submit(cluster, name, spy(cluster, refuse))
    try:
        # Then it is refused for its exception, or taken, as the package chose
        if refuse:
            assert status == 400, answer
            assert "component 'spy': importing module 'spy' raised ValueError (nimbus log reference verify-" \
                in answer["error"], answer
        else:
            assert status == 200, answer
        # and neither the answer nor nimbus's log holds a secret,
        log = nimbus_log(cluster)
        for secret in secrets_of(cluster):
            assert secret and secret not in text and secret not in log
        # for every read failed (what the package printed is in nimbus's log, and nowhere else).
        for label in ("keyring", "conf", "cmdline", "environ"):
            assert f"READ {label} FAILED" in log, label
            assert f"READ {label}" not in text
        assert "READ parent-config" not in log  # bwrap's init is its parent: no --config to follow
    finally:
        if status == 200:
            cluster.api("POST", f"topologies/{name}/kill", {"wait_secs": 0})


def test_a_sleeper_left_by_a_package_dies_with_its_sandbox(cluster: DevCluster) -> None:
    # Given a package that starts a sleeper in a session of its own, then sleeps itself
    marker = f"squall-sleeper-{os.urandom(4).hex()}"
    source = sleeper_source(marker)

    def left() -> list[Any]:
        return processes_marked(marker)

    # When it is submitted (and its sleeper is seen running)
    answers: list[tuple[int, Any, str]] = []
    thread = threading.Thread(target=lambda: answers.append(submit(cluster, "sleepy", source)),
                              name="sleepy-submit")
    thread.start()
    poll_for(left, timeout=30, message="the package's sleeper to start")
    thread.join(TIMEOUT_SECS + 60)
    # Then the answer says the verification timed out
    ((status, answer, _),) = answers
    assert status == 400 and f"did not finish in {TIMEOUT_SECS} s" in answer["error"], answer
    # and nothing the package started is left.
    poll_for(lambda: not left(), timeout=10, message="the package's processes to be gone")
    reference = answer["error"].rsplit("reference ", 1)[1].rstrip(")")
    assert any("package verification timed out" in line and reference in line
               for line in nimbus_log(cluster).splitlines())


def test_an_exceptions_message_stays_in_nimbus_log(cluster: DevCluster) -> None:
    # Given a package whose import raises with a message, part of it secret-looking
    source = "raise ValueError('plain-words-31337 password=hunter2-xyz')\n"
    # When it is submitted
    status, answer, text = submit(cluster, "raiser", source)
    # Then the answer names the exception and a reference, not the message
    assert status == 400, answer
    assert "raised ValueError (nimbus log reference verify-" in answer["error"], answer
    assert "plain-words-31337" not in text and "hunter2" not in text
    # and nimbus's log has the message under that reference, its secret redacted.
    reference = answer["error"].rsplit("reference ", 1)[1].rstrip(")")
    (line,) = [line for line in nimbus_log(cluster).splitlines() if reference in line]
    assert "plain-words-31337" in line and "password=*****" in line and "hunter2" not in line
    assert cluster.api("GET", "topologies") == []
