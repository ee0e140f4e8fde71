"""The web UI and Storm's UI REST API served by local mode (squall.local.ui): the word
count in a LocalCluster of this process, read over HTTP, in the headless Chromium of
tests/ui/test_ui_browser.py (its driver setup and skip/fail-in-CI rules), and through
``squall local --ui``.

Only the developer who ran it may use it (issue 29, finding 5): the address it prints
carries a per-run token that becomes a cookie; a request without the token, for another
Host (DNS rebinding) or changing something from another origin is refused."""

from __future__ import annotations

import contextlib
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from squall import LocalCluster
from squall.local.ui import LocalUiServer
from tests.ui.test_ui_browser import browser, wait_for  # noqa: F401 - browser: a fixture

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "examples"))
from wordcount import WordCount  # noqa: E402 - the example, as users run it

KILL_OR_DEACTIVATE = ("/api/v1/topology/WordCount/deactivate", "/api/v1/topology/WordCount/kill/0")


@pytest.fixture
def local_ui() -> Iterator[LocalUiServer]:
    """The word count running in a LocalCluster, its UI on a free port."""
    with LocalCluster() as cluster:
        cluster.submit("WordCount", WordCount)
        server = LocalUiServer(cluster, "127.0.0.1", 0).start()
        try:
            yield server
        finally:
            server.stop()


def client(base: str) -> httpx.Client:
    return httpx.Client(base_url=base, timeout=30, trust_env=False)


def printed_url(server: LocalUiServer) -> str:
    """The address ``squall local --ui`` prints (see test_squall_local_ui_serves_while_it_runs)."""
    url = server.sign_in_url
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[\w-]{40,}", url), url
    return url


@contextlib.contextmanager
def signed_in(server: LocalUiServer) -> Iterator[httpx.Client]:
    """A client that opened the printed address, as a browser does: it holds the cookie."""
    with client(server.url) as ui:
        response = ui.get(printed_url(server))
        assert response.status_code == 303 and response.headers["location"] == "/", response.text
        assert len(ui.cookies) == 1
        yield ui


def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, (response.request.url, response.status_code, response.text)
    return response.json()


def status(ui: httpx.Client) -> str:
    (entry,) = ok(ui.get("/api/v1/topology/summary"))["topologies"]
    return str(entry["status"])


def emitted(ui: httpx.Client) -> int:
    (spout,) = ok(ui.get("/api/v1/topology/WordCount?window=600"))["spouts"]
    return int(spout["emitted"])


def test_the_api_and_pages_answer_from_the_local_process(local_ui: LocalUiServer) -> None:
    with signed_in(local_ui) as ui:
        check_the_api_and_pages(ui)


def check_the_api_and_pages(ui: httpx.Client) -> None:
    page = ui.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "Squall UI" in page.text

    (entry,) = ok(ui.get("/api/v1/topology/summary"))["topologies"]
    assert (entry["id"], entry["name"], entry["status"]) == ("WordCount", "WordCount", "ACTIVE")
    assert entry["workersTotal"] >= 1 and entry["tasksTotal"] > 0
    assert ok(ui.get("/api/v1/cluster/summary"))["topologies"] == 1
    (nimbus,) = ok(ui.get("/api/v1/nimbus/summary"))["nimbuses"]
    assert nimbus["status"] == "Leader"
    (supervisor,) = ok(ui.get("/api/v1/supervisor/summary"))["supervisors"]
    assert supervisor["host"] == "localhost" and supervisor["slotsUsed"] >= 1

    def numbers() -> tuple[int, int]:
        page = ok(ui.get("/api/v1/topology/WordCount?window=600"))
        spouts = {s["spoutId"]: s for s in page["spouts"]}
        bolts = {b["boltId"]: b for b in page["bolts"]}
        assert set(spouts) == {"sentences"} and set(bolts) == {"split", "count"}
        return spouts["sentences"]["emitted"], bolts["count"]["executed"]

    first = wait_for("numbers in the 10-minute window", lambda: all(numbers()) and numbers())
    wait_for("the numbers to grow", lambda: all(a > b for a, b in zip(numbers(), first, strict=True)))

    # The workers: this process's memory and threads in each, a CPU % once sampled twice.
    def sampled() -> Any:
        workers = ok(ui.get("/api/v1/topology/WordCount?window=600"))["workers"]
        return all(isinstance(w["cpuPercent"], float) for w in workers) and workers

    workers = wait_for("two samples of this process", sampled)
    assert all(w["rssBytes"] > 10 * 2**20 and w["threads"] > 3 and w["queueDepth"] >= 0 for w in workers)
    assert all("framesDropped" in w and isinstance(w["backpressure"], bool) for w in workers)

    graph = ok(ui.get("/api/v1/topology/WordCount/visualization?window=600"))
    assert {n["id"] for n in graph["nodes"]} == {"sentences", "split", "count"}
    edges = {(e["from"], e["to"]): e for e in graph["edges"]}
    assert edges["split", "count"]["grouping"] == "fields" and edges["split", "count"]["fields"] == ["word"]

    component = ok(ui.get("/api/v1/topology/WordCount/component/count?window=600"))
    assert len(component["executorStats"]) == 2  # count's par=2
    assert {e["host"] for e in component["executorStats"]} == {"localhost"}

    answer = ok(ui.post("/api/v1/topology/WordCount/deactivate"))
    assert answer["status"] == "success"
    assert status(ui) == "INACTIVE"
    missing = ui.get("/api/v1/topology/Nothing?window=600")
    assert missing.status_code == 404, missing.text
    # Log levels are set on a cluster's workers: local mode says where its own are set.
    levels = ui.get("/api/v1/topology/WordCount/logconfig")
    assert levels.status_code == 404 and "--log-level" in levels.json()["error"], levels.text


# -- who may use it (issue 29, finding 5) ------------------------------------------------


def test_a_cross_origin_post_cannot_stop_the_local_topology(local_ui: LocalUiServer) -> None:
    evil = {"Origin": "http://evil.example"}
    # Given a page elsewhere, which has no token (SameSite=Strict keeps the cookie from it)
    with client(local_ui.url) as stranger:
        for path in KILL_OR_DEACTIVATE:
            # When it posts to kill or deactivate the topology
            refused = stranger.post(path, headers=evil)
            # Then it is refused
            assert refused.status_code in (401, 403), (path, refused.status_code, refused.text)
    # Given a page on another port of this machine, which the cookie would reach (cookies ignore ports)
    with signed_in(local_ui) as ui:
        other_port = f"http://127.0.0.1:{local_ui.port + 1}"
        for origin in ("http://evil.example", other_port, "null"):
            for path in KILL_OR_DEACTIVATE:
                refused = ui.post(path, headers={"Origin": origin})
                assert refused.status_code == 403, (origin, path, refused.status_code, refused.text)
                assert "origin" in refused.json()["error"], refused.text
        # ... a Referer from elsewhere, without an Origin, too
        refused = ui.post(KILL_OR_DEACTIVATE[0], headers={"Referer": "http://evil.example/page"})
        assert refused.status_code == 403, refused.text
        # Then the topology is still there, active, and its spout still emits
        assert "WordCount" in local_ui.backend.cluster.topologies()
        assert status(ui) == "ACTIVE"
        before = wait_for("emitted sentences", lambda: emitted(ui))
        wait_for("the spout to emit more", lambda: emitted(ui) > before)


def test_requests_without_the_token_are_refused(local_ui: LocalUiServer) -> None:
    with client(local_ui.url) as stranger:
        # A POST without the token, as curl would send it (no Origin, no Referer)
        refused = stranger.post(KILL_OR_DEACTIVATE[0])
        assert refused.status_code == 401, refused.text
        assert "UI at http://" in refused.json()["error"] and "printed" in refused.json()["error"]
        # The API's reads and /metrics too: they show the topology
        for path in ("/api/v1/topology/summary", "/api/v1/topology/WordCount?window=600", "/metrics"):
            assert stranger.get(path).status_code == 401, path
        # A token that is not this run's, as a header, a cookie or in the address
        wrong = "x" * 43
        assert stranger.get("/api/v1/topology/summary",
                            headers={"Authorization": f"Bearer {wrong}"}).status_code == 401
        assert stranger.get(f"/?token={wrong}").status_code == 401
        assert not stranger.cookies
        # The page itself loads (it then asks for the token)
        assert stranger.get("/").status_code == 200
    with signed_in(local_ui) as ui:
        assert status(ui) == "ACTIVE"


def test_local_metrics_are_nimbus_series_of_this_process(local_ui: LocalUiServer) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    def acked(ui: httpx.Client) -> dict[str, list[Any]]:
        response = ui.get("/metrics")
        assert response.status_code == 200 and response.headers["Content-Type"].startswith("text/plain")
        families = {f.name: f.samples for f in text_string_to_metric_families(response.text)}
        done = [s for s in families.get("squall_acked", []) if s.labels.get("component") == "sentences"
                and s.value > 0]
        return families if done else {}

    with signed_in(local_ui) as ui:
        families = wait_for("acked trees in /metrics", lambda: acked(ui))
    emitted = {s.labels["component"] for s in families["squall_emitted"]
               if s.labels["topology"] == "WordCount"}
    assert emitted >= {"sentences", "split", "count"}
    assert [s.value for s in families["squall_topology_workers"]] == [1]
    assert families["squall_cluster_supervisors"][0].value == 1


def test_another_host_name_is_refused(local_ui: LocalUiServer) -> None:
    # DNS rebinding: a page of evil.example, its name now resolving to 127.0.0.1, sends that
    # name as Host (and no cookie of 127.0.0.1's); refused whatever credentials come with it
    def refused_everywhere(who: httpx.Client) -> None:
        for host in ("evil.example", f"evil.example:{local_ui.port}", f"127.0.0.1:{local_ui.port + 1}"):
            for method, path in (("GET", "/"), ("GET", "/api/v1/topology/summary"),
                                 ("POST", KILL_OR_DEACTIVATE[0])):
                refused = who.request(method, path, headers={"Host": host})
                assert refused.status_code == 421, (host, path, refused.status_code, refused.text)

    with client(local_ui.url) as stranger:
        refused_everywhere(stranger)
    with signed_in(local_ui) as ui:
        refused_everywhere(ui)
        # localhost is this machine too
        localhost = {"Host": f"localhost:{local_ui.port}"}
        assert ui.get("/api/v1/topology/summary", headers=localhost).status_code == 200
        assert status(ui) == "ACTIVE"


def test_the_printed_address_signs_in(local_ui: LocalUiServer) -> None:
    # Given the address squall printed
    url = printed_url(local_ui)
    token = url.rpartition("=")[2]
    with client(local_ui.url) as ui:
        # When it is opened
        response = ui.get(url)
        # Then a cookie only this site's own requests carry, and the address without the token
        assert response.status_code == 303 and response.headers["location"] == "/"
        cookie = response.headers["set-cookie"]
        assert token in cookie and "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
        assert "path=/" in cookie.lower()
        # And the API answers to the cookie, reads and a same-origin POST that deactivates
        assert status(ui) == "ACTIVE"
        origin = f"http://127.0.0.1:{local_ui.port}"
        answer = ok(ui.post(KILL_OR_DEACTIVATE[0], headers={"Origin": origin, "Referer": origin + "/ui/"}))
        assert answer["status"] == "success" and status(ui) == "INACTIVE"
    # A script's bearer token, with neither Origin nor Referer (curl), works too
    with client(local_ui.url) as script:
        bearer = {"Authorization": f"Bearer {token}"}
        ok(script.post("/api/v1/topology/WordCount/activate", headers=bearer))
        (entry,) = ok(script.get("/api/v1/topology/summary", headers=bearer))["topologies"]
        assert entry["status"] == "ACTIVE"
    # The token on any page of the UI keeps the page's own query
    with client(local_ui.url) as ui:
        response = ui.get(f"/ui/topology.html?id=WordCount&token={token}&window=600")
        assert response.status_code == 303
        assert response.headers["location"] == "/ui/topology.html?id=WordCount&window=600"


def test_the_local_topology_page_draws_the_graph(local_ui: LocalUiServer, browser: Any) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    # Not signed in: the page loads, asks for the token, shows nothing of the topology
    browser.get(f"{local_ui.url}ui/topology.html?id=WordCount&refresh=1")
    box = wait_for("the sign-in box", lambda: browser.find_elements(By.ID, "sign-in"))
    assert "printed" in box[0].text
    assert not browser.find_elements(By.CSS_SELECTOR, "#graph g.node")
    # The printed address signs in, and leaves the token off the address bar
    browser.get(printed_url(local_ui))
    wait_for("the token off the address bar", lambda: "token=" not in browser.current_url)
    browser.get(f"{local_ui.url}ui/topology.html?id=WordCount&refresh=1")
    nodes = wait_for("the graph", lambda: browser.find_elements(By.CSS_SELECTOR, "#graph g.node"))
    assert sorted(n.get_attribute("data-id") for n in nodes) == ["count", "sentences", "split"]
    # The page's own POST (same origin, the cookie) deactivates the topology
    browser.find_element(By.ID, "deactivate").click()
    wait_for("the confirm", lambda: browser.switch_to.alert).accept()
    wait_for("the topology inactive", lambda: not local_ui.backend.cluster.topologies()["WordCount"].active)


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
            found = re.match(r"UI at (http://127\.0\.0\.1:\d+/\?token=[\w-]+)$", line.strip())
            url = found.group(1) if found else None
        assert url, "no 'UI at' line with a token within 30s"
        parts = urlsplit(url)
        with client(f"{parts.scheme}://{parts.netloc}") as ui:
            assert ui.get("/api/v1/topology/summary").status_code == 401
            assert ui.get(url).status_code == 303
            (entry,) = ok(ui.get("/api/v1/topology/summary"))["topologies"]
        assert entry["name"] == "WordCount" and entry["status"] == "ACTIVE"
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        reader.join(10)  # at the pipe's end once the process is gone
        if proc.stdout is not None:
            proc.stdout.close()
