"""Security finding "a dependency build is user code", against a real secure dev cluster
started as root (as CI runs): ``squall submit --requirements`` made nimbus run pip as
root, with the network and its whole environment, on whatever the file named (an sdist
whose build backend then ran as uid 0), and sent pip's output back in the 400 answer;
32 submits naming a slow URL held every request slot.

Now a cluster builds only wheels from its index unless its admin allows more, a build
runs as a throwaway uid in the sandbox, its output goes to nimbus's log under a
reference, and nimbus refuses a build past its caps at once (429)."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from squall.cli.args import load_topology
from squall.cli.packing import plan, portable
from squall.config import DEFAULTS
from squall.runtime import sandbox
from squall.runtime.package import pack
from squall.security.keyring import Keyring
from squall.testing import poll_for
from tests.cluster.conftest import REPO, squall_cli
from tests.helpers import make_sdist, make_wheel

WORDCOUNT = REPO / "examples" / "wordcount.py"
BUILD_UIDS = DEFAULTS["squall.env.build.uids"]

# The probe the hostile sdist's build backend runs when pip imports it: what it can read
# of the daemons' (each target: what it saw, or why not), whether it can plant a file as
# root would, who it is and its environment; then a line that must never reach the
# submitter; then it fails the build, so that pip prints what it printed.
PROBE = """
import json, os
environ = ";".join(f"{k}={v}" for k, v in os.environ.items())
report = {"uid": os.getuid(), "environ": environ.replace(chr(34), "").replace(chr(92), "")}
for target in TARGETS:
    try:
        seen = ",".join(sorted(os.listdir(target))) if os.path.isdir(target) else open(target).read(64)
        report[target] = "GOT " + seen
    except OSError as e:
        report[target] = "refused " + type(e).__name__
try:
    with open(MARKER, "w") as f:
        f.write("built as root")
    report["marker"] = "written"
except OSError as e:
    report["marker"] = "refused " + type(e).__name__
print("PROBE " + json.dumps(report).replace("'", ""), flush=True)
print("SECRET-FROM-THE-BACKEND " + SECRET, flush=True)

def get_requires_for_build_wheel(config_settings=None):
    raise SystemExit(3)
"""

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or sandbox.unavailable(sandbox.Identity(BUILD_UIDS[0], BUILD_UIDS[0])) is not None,
    reason="needs root and bubblewrap")


def submit_body(name: str, lines: list[str]) -> bytes:
    """What ``squall submit examples/wordcount.py --requirements R`` sends for ``lines``.
    Packed from a copy in a folder of its own: this process may have imported other
    examples (another test's), which a package rooted at examples/ would take in too."""
    project = Path(tempfile.mkdtemp(prefix="envbuild-"))
    source = project / "wordcount_envbuild.py"
    shutil.copyfile(WORDCOUNT, source)
    topology = load_topology(str(source))
    code = pack(plan(str(source), topology.definition(), topology.config).entries,
                DEFAULTS["nimbus.code.max.bytes"])
    return json.dumps({"name": name, "conf": {},
                       "topology": portable(topology.definition().to_dict(), project),
                       "code": base64.b64encode(code).decode(),
                       "requirements": {"source": "requirements.txt", "lines": lines}}).encode()


def nimbus_log(cluster: Any) -> str:
    return (cluster.root / "logs" / "nimbus-0.log").read_text(errors="replace")


def test_a_hostile_sdist_is_refused_then_builds_only_in_the_sandbox(make_cluster: Any,
                                                                    tmp_path: Path) -> None:
    sdists = tmp_path / "sdists"
    sdists.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cluster = make_cluster(supervisors=1, slots=1, drpc=False,
                           conf={"squall.env.build.paths": [str(sdists)]})
    nimbus_dir = cluster.root / "squall-local"
    marker_dir = tmp_path / "root-only"
    marker_dir.mkdir(mode=0o755)
    marker = marker_dir / "pwned"
    keyring = Keyring.load(cluster.keyring_file)
    secret = f"s3cr3t-{os.urandom(4).hex()}"
    nimbus_pid = cluster.procs["nimbus-0"].pid
    targets = [str(cluster.keyring_file), str(cluster.supervisor_keyring_file), str(cluster.config_file),
               str(cluster.root / "nimbus-0.yaml"), str(cluster.root / "logs"),
               str(cluster.root / "zookeeper"),
               str(cluster.supervisor_dir(0)), str(nimbus_dir), str(nimbus_dir / "envs"),
               f"/proc/{nimbus_pid}/environ", os.path.expanduser("~/.squall"), "/etc/shadow", str(marker_dir)]
    backend = f"TARGETS = {targets!r}\nMARKER = {str(marker)!r}\nSECRET = {secret!r}\n{PROBE}"
    sdist = make_sdist(sdists, "sqhostile", "1.0", backend)
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(f"--no-index\n{sdist}\n")

    # When it is submitted to a cluster whose admin allowed its directory but not sdists
    refused = squall_cli(cluster, "submit", str(WORDCOUNT), "--name", "hostile", "--requirements",
                         str(requirements), check=False)
    # Then it is refused by policy, naming the line and the key that would allow it, with nothing run
    assert refused.returncode != 0
    assert "is a source distribution or source tree, whose build runs its own code" in refused.stderr
    assert f"requirement 2: {str(sdist)!r}" in refused.stderr, refused.stderr
    assert "lists 'sdist' in squall.env.build.allow" in refused.stderr
    # and a topology's own conf cannot allow it: those keys are the cluster's
    own = squall_cli(cluster, "submit", str(WORDCOUNT), "--name", "hostile", "--requirements",
                     str(requirements), "--conf", 'squall.env.build.allow=["sdist"]', check=False)
    assert own.returncode != 0 and "squall.env.build.allow" in own.stderr, own.stderr
    assert "environment build output" not in nimbus_log(cluster) and not marker.exists()
    assert not any(p.name != ".locks" for p in (nimbus_dir / "envs").glob("*"))

    # When the admin allows sdists (nimbus restarted with its new conf)
    cluster.kill_process("nimbus-0", "term")
    cluster.conf["squall.env.build.allow"] = ["sdist"]
    cluster.start_nimbus(0)
    cluster.wait_ready(60)
    # an sdist outside the allowed directory is still refused, naming the key for paths
    outside = make_sdist(elsewhere, "sqhostile", "1.0", backend)
    requirements.write_text(f"--no-index\n{outside}\n")
    refused = squall_cli(cluster, "submit", str(WORDCOUNT), "--name", "hostile", "--requirements",
                         str(requirements), check=False)
    assert refused.returncode != 0 and "squall.env.build.paths" in refused.stderr, refused.stderr
    # and the one inside is built, as a throwaway uid in the sandbox
    requirements.write_text(f"--no-index\n{sdist}\n")
    built = squall_cli(cluster, "submit", str(WORDCOUNT), "--name", "hostile", "--requirements",
                       str(requirements), check=False)
    answer = built.stdout + built.stderr
    assert built.returncode != 0
    found = re.search(r"nimbus log reference (env-[0-9a-f]{8})", answer)
    assert found, answer
    assert "ERROR: Failed to build" in answer
    # Then the submitter sees none of what the backend printed ...
    assert "PROBE" not in answer and "SECRET-FROM-THE-BACKEND" not in answer and secret not in answer
    # ... which is in nimbus's log, under the reference the answer names
    line = next(x for x in nimbus_log(cluster).splitlines()
                if found[1] in x and "environment build output" in x)
    assert f"SECRET-FROM-THE-BACKEND {secret}" in line
    report = json.loads(re.search(r"PROBE (\{.*?\})\\n", line)[1])
    # and the backend ran as a uid of squall.env.build.uids, reaching no key and no daemon file
    assert BUILD_UIDS[0] <= report.pop("uid") <= BUILD_UIDS[1]
    environ = report.pop("environ")
    assert report.pop("marker").startswith("refused") and not marker.exists()
    # (the folders on the way to the environment being built show that way only)
    assert report.pop(str(nimbus_dir)) == "GOT envs"
    env_seen = report.pop(str(nimbus_dir / "envs"))
    assert re.fullmatch(r"GOT [0-9a-f]{64}", env_seen), env_seen
    got = {target: seen for target, seen in report.items() if not seen.startswith("refused")}
    assert not got, f"the build backend reached: {got}"
    # nothing of the daemon's environment, no token, no keyring path
    names = {pair.split("=", 1)[0] for pair in environ.split(";")}
    ours = {"PATH", "HOME", "TMPDIR", "USER", "LOGNAME", "LANG", "PYTHONNOUSERSITE", "PIP_NO_CACHE_DIR",
            "PIP_NO_INPUT", "PIP_DISABLE_PIP_VERSION_CHECK"}
    pips = {"PWD", "PYTHONPATH", "PIP_BUILD_TRACKER", "_PYPROJECT_HOOKS_BUILD_BACKEND",
            "_PYPROJECT_HOOKS_BACKEND_PATH_JSON"}  # what pip sets for a build backend
    assert names <= ours | pips, names - ours - pips
    tokens = [keyring.client_token, *(p for _u, p in keyring.zookeeper_credentials())]
    assert all(t and t not in line for t in tokens) and str(cluster.keyring_file) not in environ
    # and nothing of the failed build is left
    poll_for(lambda: not any(p.name != ".locks" for p in (nimbus_dir / "envs").glob("*")), timeout=10,
             message="the failed environment removed")
    assert "no topologies running" in squall_cli(cluster, "list").stdout


class SlowIndex:
    """Wheels over HTTP on a free loopback port; a request for a path holding ``slow``
    waits until :attr:`release` is set, as a slow server would."""

    def __init__(self, directory: Path) -> None:
        self.release = threading.Event()
        self.asked: list[str] = []
        index = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                index.asked.append(self.path)
                if "slow" in self.path:
                    index.release.wait(60)
                data = (directory / self.path.lstrip("/")).read_bytes()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    @contextmanager
    def serving(self) -> Iterator[SlowIndex]:
        thread = threading.Thread(target=self.server.serve_forever, name="slow-index", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.release.set()
            self.server.shutdown()
            self.server.server_close()
            thread.join(10)


def test_builds_past_the_caps_are_refused_at_once(make_cluster: Any, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for name in ("sqfast", "sqslowa", "sqslowb", "sqslowc", "sqslowd"):
        make_wheel(wheels, name, "1.0")
    cluster = make_cluster(supervisors=1, slots=4, drpc=False, conf={
        "squall.env.build.allow": ["url"], "nimbus.env.builds.per.user": 1, "nimbus.env.builds.max": 2})
    keyring = Keyring.load(cluster.keyring_file)
    tokens = {"admin": keyring.client_token, "bob": keyring.add_user("bob"),
              "carol": keyring.add_user("carol")}
    keyring.save()

    with SlowIndex(wheels).serving() as index:
        def lines(name: str) -> list[str]:
            return ["--no-index", f"{name} @ {index.url}/{name}-1.0-py3-none-any.whl"]

        def submit(user: str, name: str, package: str) -> Any:
            return cluster.request("POST", "/api/v1/topologies", submit_body(name, lines(package)),
                                   token=tokens[user], timeout=120)

        # Given an environment built and cached
        first = submit("admin", "fast", "sqfast")
        assert first.status_code == 200, first.text
        answers: dict[str, Any] = {}

        def slow(user: str, name: str, package: str) -> threading.Thread:
            thread = threading.Thread(target=lambda: answers.update({name: submit(user, name, package)}))
            thread.start()
            return thread

        # When the admin's build waits on a slow URL (holding its one build at once)
        waiting = [slow("admin", "slow-a", "sqslowa")]
        poll_for(lambda: any("sqslowa" in p for p in index.asked), timeout=60, message="the first slow fetch")
        # Then the admin's next build is refused at once, while a cached one needs no build
        refused = submit("admin", "slow-b", "sqslowb")
        assert refused.status_code == 429 and "nimbus.env.builds.per.user" in refused.json()["error"]
        assert refused.elapsed.total_seconds() < 5
        cached = submit("admin", "fast-again", "sqfast")
        assert cached.status_code == 200 and cached.json()["environment"]["built"] is False, cached.text
        # When bob's build takes the cluster's second slot, carol's is refused: two at once in all
        waiting.append(slow("bob", "slow-c", "sqslowc"))
        poll_for(lambda: any("sqslowc" in p for p in index.asked), timeout=60, message="bob's slow fetch")
        refused = submit("carol", "slow-d", "sqslowd")
        assert refused.status_code == 429 and "nimbus.env.builds.max" in refused.json()["error"]
        assert refused.elapsed.total_seconds() < 5
        # and the running builds finish once the URL answers
        index.release.set()
        for thread in waiting:
            thread.join(120)
        assert {name: a.status_code for name, a in answers.items()} == {"slow-a": 200, "slow-c": 200}
        # a slot is free again
        assert submit("carol", "slow-d", "sqslowd").status_code == 200
