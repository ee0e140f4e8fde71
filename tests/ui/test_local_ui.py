"""The web UI and Storm's UI REST API served by local mode (squall.local.ui): the word
count in a LocalCluster of this process, read over HTTP, in the headless Chromium of
tests/ui/test_ui_browser.py (its driver setup and skip/fail-in-CI rules), and through
``squall local --ui``."""

from __future__ import annotations

import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from squall import LocalCluster
from squall.cli.client import http_client
from squall.local.ui import LocalUiServer
from tests.ui.test_ui_browser import browser, fetch, get_json, wait_for  # noqa: F401 - browser: a fixture

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "examples"))
from wordcount import WordCount  # noqa: E402 - the example, as users run it


@pytest.fixture
def local_ui() -> Iterator[str]:
    """The word count running in a LocalCluster, its UI on a free port: the UI's base URL."""
    with LocalCluster() as cluster:
        cluster.submit("WordCount", WordCount)
        server = LocalUiServer(cluster, "127.0.0.1", 0).start()
        try:
            yield server.url.rstrip("/")
        finally:
            server.stop()


def post(url: str) -> tuple[int, Any]:
    with http_client() as client:
        response = client.post(url, content=b"")
    response.raise_for_status()
    return response.status_code, response.json()


def test_the_api_and_pages_answer_from_the_local_process(local_ui: str) -> None:
    status, content_type, body = fetch(local_ui + "/")
    assert status == 200 and "text/html" in content_type and b"Squall UI" in body

    (entry,) = get_json(local_ui + "/api/v1/topology/summary")["topologies"]
    assert (entry["id"], entry["name"], entry["status"]) == ("WordCount", "WordCount", "ACTIVE")
    assert entry["workersTotal"] >= 1 and entry["tasksTotal"] > 0
    assert get_json(local_ui + "/api/v1/cluster/summary")["topologies"] == 1
    (nimbus,) = get_json(local_ui + "/api/v1/nimbus/summary")["nimbuses"]
    assert nimbus["status"] == "Leader"
    (supervisor,) = get_json(local_ui + "/api/v1/supervisor/summary")["supervisors"]
    assert supervisor["host"] == "localhost" and supervisor["slotsUsed"] >= 1

    def numbers() -> tuple[int, int]:
        page = get_json(local_ui + "/api/v1/topology/WordCount?window=600")
        spouts = {s["spoutId"]: s for s in page["spouts"]}
        bolts = {b["boltId"]: b for b in page["bolts"]}
        assert set(spouts) == {"sentences"} and set(bolts) == {"split", "count"}
        return spouts["sentences"]["emitted"], bolts["count"]["executed"]

    first = wait_for("numbers in the 10-minute window", lambda: all(numbers()) and numbers())
    wait_for("the numbers to grow", lambda: all(a > b for a, b in zip(numbers(), first, strict=True)))

    # The workers: this process's memory and threads in each, a CPU % once sampled twice.
    def sampled() -> Any:
        workers = get_json(local_ui + "/api/v1/topology/WordCount?window=600")["workers"]
        return all(isinstance(w["cpuPercent"], float) for w in workers) and workers

    workers = wait_for("two samples of this process", sampled)
    assert all(w["rssBytes"] > 10 * 2**20 and w["threads"] > 3 and w["queueDepth"] >= 0 for w in workers)
    assert all("framesDropped" in w and isinstance(w["backpressure"], bool) for w in workers)

    graph = get_json(local_ui + "/api/v1/topology/WordCount/visualization?window=600")
    assert {n["id"] for n in graph["nodes"]} == {"sentences", "split", "count"}
    edges = {(e["from"], e["to"]): e for e in graph["edges"]}
    assert edges["split", "count"]["grouping"] == "fields" and edges["split", "count"]["fields"] == ["word"]

    component = get_json(local_ui + "/api/v1/topology/WordCount/component/count?window=600")
    assert len(component["executorStats"]) == 2  # count's par=2
    assert {e["host"] for e in component["executorStats"]} == {"localhost"}

    status, answer = post(local_ui + "/api/v1/topology/WordCount/deactivate")
    assert status == 200 and answer["status"] == "success"
    (entry,) = get_json(local_ui + "/api/v1/topology/summary")["topologies"]
    assert entry["status"] == "INACTIVE"
    status, _, body = fetch(local_ui + "/api/v1/topology/Nothing?window=600")
    assert status == 404, body


def test_the_local_topology_page_draws_the_graph(local_ui: str, browser: Any) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    browser.get(f"{local_ui}/ui/topology.html?id=WordCount&refresh=1")
    nodes = wait_for("the graph", lambda: browser.find_elements(By.CSS_SELECTOR, "#graph g.node"))
    assert sorted(n.get_attribute("data-id") for n in nodes) == ["count", "sentences", "split"]


def test_squall_local_ui_serves_while_it_runs() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "squall.cli", "local", "examples/wordcount.py",
                             "--duration", "6", "--ui", "--ui-port", "0"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: queue.Queue[str] = queue.Queue()
    # A thread reads stdout, so that waiting for the UI line is bounded and the pipe never fills.
    reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or []], daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 30
        url = None
        while url is None and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            found = re.match(r"UI at (http://127\.0\.0\.1:\d+/)$", line.strip())
            url = found.group(1) if found else None
        assert url, "no 'UI at' line within 30s"
        (entry,) = get_json(url + "api/v1/topology/summary")["topologies"]
        assert entry["name"] == "WordCount" and entry["status"] == "ACTIVE"
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        reader.join(10)  # at the pipe's end once the process is gone
        if proc.stdout is not None:
            proc.stdout.close()
