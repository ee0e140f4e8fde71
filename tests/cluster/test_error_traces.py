"""A bolt that raises: the user sees the trace, with file and line, where they look --
`squall errors`, Storm's REST componentErrors, the worker's log through its node's logviewer
(`squall logs`, the REST answer's errorWorkerLogLink: with a token nimbus minted for a user
who may read it), local
mode's output (issue 30).  The UI's side is in tests/ui/test_ui_browser.py."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from squall.cli.client import credentials, http_client
from squall.security.keyring import Keyring
from squall.testing import poll_for
from tests.cluster.conftest import REPO, TOPOLOGIES, squall_cli

RAISING = TOPOLOGIES / "raising.py"
LINE = next(i for i, text in enumerate(RAISING.read_text().splitlines(), 1) if "RAISES HERE" in text)
WHERE = f'raising.py", line {LINE}, in process'


def test_a_bolts_trace_reaches_squall_errors_and_the_rest_answer(make_cluster: Any) -> None:
    cluster = make_cluster(supervisors=1, slots=1)
    squall_cli(cluster, "submit", str(RAISING), "--name", "raising")
    errors = poll_for(lambda: cluster.api("GET", "topology/raising/component/picky?window=600")
                      ["componentErrors"], timeout=90, message="the bolt's first error")
    assert WHERE in errors[0]["error"] and "ValueError: 0 is a multiple of five" in errors[0]["error"]
    out = squall_cli(cluster, "errors", "raising").stdout
    assert WHERE in out and "picky" in out
    assert out.count(WHERE) == 1  # each distinct trace once, however many times it was raised
    brief = squall_cli(cluster, "errors", "raising", "--brief").stdout
    assert "ValueError" in brief and WHERE not in brief

    # The worker's log, through its node's logviewer, with a token nimbus minted for it: the
    # trace is there, line by line
    link = errors[0]["errorWorkerLogLink"]
    assert link.startswith("https://127.0.0.1:") and "/api/v1/log?file=raising-" in link
    viewer = link.split("/api/v1/")[0]
    admin, context = credentials(cluster.conf)

    def minted(token: str) -> str:
        body = json.dumps({"logviewer": viewer}).encode()
        answer = cluster.request("POST", "/api/v1/logviewer/token", body, token=token)
        assert answer.status_code == 200, answer.text
        return answer.json()["token"]  # type: ignore[no-any-return]

    with http_client(context) as client:
        log = client.get(link, headers={"Authorization": f"Bearer {minted(admin)}"})
        assert log.status_code == 200, log.text
        assert "Traceback (most recent call last):" in log.text and WHERE in log.text
        # And no one else's token reads it: none at all, or a user's who is not its owner
        # (added now: nimbus knows them at once, the supervisors need not)
        assert client.get(link).status_code == 401
        keyring = Keyring.load(cluster.keyring_file)
        bob = keyring.add_user("bob")
        keyring.save()
        refused = client.get(link, headers={"Authorization": f"Bearer {minted(bob)}"})
        assert refused.status_code == 403 and "may not read the logs" in refused.json()["error"]
    # And `squall logs` reads it as the CLI's user, the component's own lines and their traces
    out = squall_cli(cluster, "logs", "raising", "--component", "picky", "--grep", "multiple of five").stdout
    assert "ValueError: 0 is a multiple of five" in out or "is a multiple of five" in out
    lines = squall_cli(cluster, "logs", "raising", "-c", "picky").stdout.splitlines()
    assert any(WHERE in line for line in lines), lines[-20:]
    # Its lines name the topology as it was submitted, as local mode's do, not by its class
    events = [line for line in lines if "component=picky" in line]
    assert events and all("topology=raising " in line for line in events), events[:3]
    assert all(line.startswith("127.0.0.1:") for line in lines)


def test_local_mode_prints_each_distinct_trace_once() -> None:
    result = subprocess.run([sys.executable, "-m", "squall.cli", "local", str(RAISING), "--duration", "2"],
                            capture_output=True, text=True, timeout=120, cwd=REPO, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(WHERE) == 1, result.stdout[-2000:]
    assert "--- error in picky" in result.stdout and "distinct (traces above)" in result.stdout
