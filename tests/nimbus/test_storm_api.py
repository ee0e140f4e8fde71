"""Storm's UI REST API on nimbus: the shapes as pure functions first, then a real
cluster (ZooKeeper, nimbus, a supervisor, worker processes) running the word
count, read and driven the way a script written against Storm's API does."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from squall.cli.client import credentials
from squall.cli.devcluster import DevCluster
from squall.metrics.book import StatsBook
from squall.metrics.windows import WINDOW_IDS
from squall.nimbus.views import TopologyViews
from squall.testing import poll_for
from squall.ui import storm_api as api

REPO = Path(__file__).resolve().parents[2]
TID = "tx-1700000000-abc123"

# -- pure shapes -------------------------------------------------------------------


def test_storms_pretty_times_and_statuses() -> None:
    assert api.pretty_secs(1759) == "29m 19s"
    assert api.pretty_secs(600) == "10m 0s"
    assert api.pretty_secs(86400) == "1d 0h 0m 0s"
    assert api.pretty_secs(0) == "0s"
    assert [api.window_hint(w) for w in WINDOW_IDS] == ["10m 0s", "3h 0m 0s", "1d 0h 0m 0s", "All time"]
    statuses = [api.storm_status(s) for s in ("active", "inactive", "killing")]
    assert statuses == ["ACTIVE", "INACTIVE", "KILLED"]


def test_storms_rebalance_body_and_wait_time() -> None:
    body = {"rebalanceOptions": {"numWorkers": 2, "executors": {"spout": "5", "count": 3}}, "callback": "foo"}
    assert api.rebalance_request(body) == {"workers": 2, "executors": {"spout": 5, "count": 3}}
    assert api.rebalance_request(None) == {}
    with pytest.raises(ValueError, match="numWorkers must be a whole number"):
        api.rebalance_request({"rebalanceOptions": {"numWorkers": "two"}})
    assert api.wait_secs("30") == 30
    with pytest.raises(ValueError, match="whole seconds"):
        api.wait_secs("-1")


def _view() -> api.TopologyView:
    """A transactional-style topology: a spout id holding '/', a bolt of two executors, the acker."""
    book = StatsBook()
    spout = {"component": "spout/coordinator", "executor": [1, 1], "acked": 40, "failed": 2,
             "complete_secs": 2.0, "emitted": {"default": 42}, "transferred": {"default": 42},
             "pending": 17, "max_pending": 750}

    def bolt(executor: int, executed: int) -> dict[str, Any]:
        return {"component": "split", "executor": [executor, executor], "executed": executed,
                "acked": executed, "failed": 0, "busy_secs": executed / 1000,
                "emitted": {"default": 8 * executed}, "transferred": {"default": 8 * executed},
                "executed_by": {"spout/coordinator:default": executed}}

    book.ingest(TID, ("n1", "6700", 1), [spout, bolt(2, 10)], now=1000.0)
    book.ingest(TID, ("n1", "6701", 2), [bolt(3, 30)], now=1000.0)
    components = {
        "spout/coordinator": {"kind": "spout", "tasks": [1], "executors": [(1, 1)], "inputs": [],
                              "streams": ["default"]},
        "split": {"kind": "bolt", "tasks": [2, 3], "executors": [(2, 2), (3, 3)],
                  "inputs": [("spout/coordinator", "default")], "streams": ["default"]},
        "__acker": {"kind": "acker", "tasks": [4], "executors": [(4, 4)], "inputs": [], "streams": []},
    }
    workers = [{"node": "n1", "host": "h1", "port": 6700, "executors": [[1, 1], [2, 2]], "since": 990.0},
               {"node": "n1", "host": "h1", "port": 6701, "executors": [[3, 3], [4, 4]], "since": 995.0}]
    errors = [{"component": "split", "task": 2, "error": "ValueError: bad", "time": 1005.0, "node": "n1",
               "trace": 'Traceback (most recent call last):\n  File "split.py", line 3, in process\n'
                        'ValueError: bad\n',
               "port": 6700}]
    view = api.TopologyView(id=TID, name="tx", status="inactive", submitted=900.0,
                            conf={"topology.message.timeout.secs": 30}, components=components,
                            workers=workers, errors=errors)
    # worker 6700 reported twice (1 CPU second and 0.1 GC second over 2 s), 6701 not yet
    before = {"time": 1000.0, "system": {"cpu_secs": 3.0, "gc_secs": 0.5}}
    latest = {"time": 1002.0, "queue_depth": 7,
              "system": {"cpu_secs": 4.0, "gc_secs": 0.6, "rss_bytes": 50_000_000, "threads": 9,
                         "gc_collections": [10, 2, 1], "backpressure": False},
              "transfer": {"frames_sent": 5, "frames_received": 6, "frames_dropped": 0}}
    view.samples = {("n1", 6700): [before, latest]}
    for window in WINDOW_IDS:
        view.stats[window] = book.components(TID, window, 1010.0)
        view.executor_stats[window] = book.executors(TID, window, 1010.0)
    return view


def test_the_topology_page_has_storms_fields() -> None:
    page = api.topology_page(_view(), "600", now=1010.0)
    assert (page["id"], page["status"], page["uptimeSeconds"]) == (TID, "INACTIVE", 110)
    assert page["uptime"] == "1m 50s" and page["msgTimeout"] == 30
    assert (page["tasksTotal"], page["workersTotal"], page["executorsTotal"]) == (4, 2, 4)
    (spout,) = page["spouts"]
    assert spout["spoutId"] == "spout/coordinator" and spout["encodedSpoutId"] == "spout%2Fcoordinator"
    assert (spout["acked"], spout["failed"], spout["completeLatency"]) == (40, 2, "50.000")
    assert spout["timedOut"] == 0  # Squall's own field: of failed, those not acked in time
    (split,) = page["bolts"]  # the acker only with sys=1
    assert (split["boltId"], split["executed"], split["executors"], split["tasks"]) == ("split", 40, 2, 2)
    assert split["executeLatency"] == "1.000" and split["capacity"] == "0.003"
    assert (split["lastError"], split["errorHost"], split["errorPort"]) == ("ValueError: bad", "h1", 6700)
    stats = {s["window"]: s for s in page["topologyStats"]}
    assert stats["600"]["acked"] == 40 and stats["600"]["emitted"] == 42 + 320
    assert page["workers"][1]["componentNumTasks"] == {"split": 1, "__acker": 1}
    first, second = page["workers"]
    assert first["rssBytes"] == 50_000_000 and first["threads"] == 9 and first["queueDepth"] == 7
    assert (first["cpuPercent"], first["gcPercent"], first["gcCollections"]) == (50.0, 5.0, [10, 2, 1])
    assert (first["framesSent"], first["framesReceived"], first["framesDropped"]) == (5, 6, 0)
    assert first["backpressure"] is False
    squall_fields = ("rssBytes", "cpuPercent", "gcPercent", "gcCollections", "threads", "framesSent",
                     "framesReceived", "framesDropped", "queueDepth", "backpressure")
    assert {key: second[key] for key in squall_fields} == dict.fromkeys(squall_fields)  # not reported yet
    # a rate needs two samples
    assert api.worker_system(None, _view().samples["n1", 6700][1])["cpuPercent"] is None
    with_system = api.topology_page(_view(), "600", 1010.0, sys=True)
    assert [b["boltId"] for b in with_system["bolts"]] == ["__acker", "split"]


class _Beats:
    """What TopologyViews.ingest_stats reads of ClusterState: the topologies and the beats."""

    def __init__(self) -> None:
        self.beats: dict[str, dict[str, dict[str, Any]]] = {}

    def topologies(self) -> list[dict[str, Any]]:
        return [{"id": TID}]

    def worker_beats(self) -> dict[str, dict[str, dict[str, Any]]]:
        return self.beats


def test_nimbus_keeps_each_workers_last_two_samples() -> None:
    state = _Beats()
    views = TopologyViews(state, now=lambda: 1000.0)  # type: ignore[arg-type] - a stand-in

    def beat(time: float, cpu: float, pid: int = 1, tid: str = TID) -> None:
        state.beats = {"n1": {"6700": {"time": time, "pid": pid, "topology_id": tid,
                                       "system": {"cpu_secs": cpu}, "executor_stats": [
                                           {"component": "split", "executor": [2, 2], "queue_depth": 2},
                                           {"component": "split", "executor": [3, 3], "queue_depth": 3}]}}}
        views.ingest_stats()

    def cpu() -> Any:
        return api.worker_system(*views.samples(TID)[("n1", 6700)])["cpuPercent"]

    beat(10.0, 1.0)
    assert cpu() is None and views.samples(TID)[("n1", 6700)][1]["queue_depth"] == 5
    beat(12.0, 2.0)
    assert cpu() == 50.0
    beat(12.0, 2.0)  # the same beat read again: the rate stays
    assert cpu() == 50.0
    beat(13.0, 0.1, pid=2)  # a restarted worker: no rate across the two processes
    assert cpu() is None
    beat(14.0, 0.2, pid=2, tid="other")  # another topology's worker (a dead one's)
    assert views.samples(TID) == {}
    state.beats = {}
    views.ingest_stats()
    assert views.worker_samples == {}


def test_the_component_page_lists_executors_and_streams() -> None:
    page = api.component_page(_view(), "split", "600", now=1010.0)
    assert page["componentType"] == "bolt" and page["topologyStatus"] == "INACTIVE"
    assert [(e["id"], e["host"], e["port"], e["executed"]) for e in page["executorStats"]] == [
        ("[2-2]", "h1", 6700, 10), ("[3-3]", "h1", 6701, 30)]
    (inp,) = page["inputStats"]
    assert (inp["component"], inp["encodedComponentId"], inp["stream"], inp["executed"], inp["acked"]) == (
        "spout/coordinator", "spout%2Fcoordinator", "default", 40, 40)
    assert page["outputStats"] == [{"stream": "default", "emitted": 320, "transferred": 320}]
    assert [s["window"] for s in page["boltStats"]] == list(WINDOW_IDS)
    # Storm's "error" is the whole trace, where there is one (lastError stays the one line)
    assert page["componentErrors"][0]["error"].startswith("Traceback (most recent call last):")
    assert page["componentErrors"][0]["error"].endswith("ValueError: bad\n")
    spout = api.component_page(_view(), "spout/coordinator", "600", now=1010.0)
    assert spout["encodedId"] == "spout%2Fcoordinator" and spout["spoutSummary"][0]["acked"] == 40
    assert spout["outputStats"][0]["completeLatency"] == "50.000"
    # the spout's trees in flight and its (tuned) max spout pending, per executor
    (executor,) = spout["executorStats"]
    assert (executor["pending"], executor["maxSpoutPending"]) == (17, 750)


def test_the_pages_say_what_is_sampled_and_link_the_events_log() -> None:
    view = _view()
    view.logviewers = {"n1": "https://h1:8000"}
    page = api.topology_page(view, "600", now=1010.0)
    assert (page["debug"], page["samplingPct"]) == (False, 10.0)  # Storm's values while off
    split = api.component_page(view, "split", "600", now=1010.0)
    assert (split["debug"], split["samplingPct"]) == (False, 10.0)
    # the events.log of the worker running the component's first executor
    assert split["eventLogLink"] == f"https://h1:8000/api/v1/log?file={TID}%2F6700%2Fevents.log"
    view.debug = {"topology": {"enable": True, "samplingpct": 20.0},
                  "components": {"split": {"enable": False, "samplingpct": 10.0}}}
    assert (api.topology_page(view, "600", 1010.0)["debug"], api.topology_page(view, "600", 1010.0)[
        "samplingPct"]) == (True, 20.0)
    assert api.component_page(view, "split", "600", 1010.0)["debug"] is False  # its own setting wins
    spout = api.component_page(view, "spout/coordinator", "600", 1010.0)
    assert (spout["debug"], spout["samplingPct"]) == (True, 20.0)  # the topology's
    view.debug, view.conf = {}, {**view.conf, "topology.debug": True}  # set at submit: everything
    assert api.topology_page(view, "600", 1010.0)["samplingPct"] == 100.0
    view.workers = []
    assert api.component_page(view, "split", "600", 1010.0)["eventLogLink"] == ""  # no worker runs it


# -- a real cluster ------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    """One cluster for the module, two nimbuses (reads work on either, actions on the
    leader only), the word count running on it in two workers."""
    c = DevCluster(tmp_path_factory.mktemp("storm-api") / "c", supervisors=1, slots=2,
                   conf={"nimbus.stats.freq.secs": 1}, nimbuses=2)
    try:
        c.start()
        submit(c, str(REPO / "examples" / "wordcount.py"), "--conf", "topology.workers=2")
        yield c
    finally:
        c.stop()


def submit(cluster: DevCluster, *args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "squall.cli", "submit", "--config",
                           str(cluster.config_file), *args], capture_output=True, text=True, timeout=120,
                          cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def call(cluster: DevCluster, path: str, method: str = "GET", body: Any = None,
         url: str | None = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    response = cluster.request(method, (url or cluster.nimbus_url) + path, data,
                               headers={"Content-Type": "application/json"})
    return response.status_code, json.loads(response.content)


def get(cluster: DevCluster, path: str) -> Any:
    status, body = call(cluster, path)
    assert status == 200, (path, body)
    return body


def topology_id(cluster: DevCluster) -> str:
    (topology,) = get(cluster, "/api/v1/topology/summary")["topologies"]
    return topology["id"]


def flowing(cluster: DevCluster, ident: str) -> dict[str, Any]:
    """The topology page once spouts have acked trees and the bolts have worked."""
    def ready() -> Any:
        page = get(cluster, f"/api/v1/topology/{ident}?window=600")
        bolts = {b["boltId"]: b for b in page["bolts"]}
        return (page["topologyStats"][0]["acked"] > 0 and page["spouts"][0]["emitted"] > 0
                # (a latency shows in ms to 3 places: the count's, under half a microsecond now, shows 0)
                and all(float(b["capacity"]) > 0 and b["executed"] > 0 and float(b["executeLatency"]) >= 0
                        for b in bolts.values())
                and float(page["spouts"][0]["completeLatency"]) > 0 and page)

    return poll_for(ready, timeout=60, interval=0.2, message="acked trees in the 10-minute window")


def test_the_cluster_answers_storms_summaries(cluster: DevCluster) -> None:
    summary = get(cluster, "/api/v1/cluster/summary")
    assert (summary["supervisors"], summary["topologies"], summary["slotsTotal"]) == (1, 1, 2)
    assert summary["slotsUsed"] + summary["slotsFree"] == 2 and summary["tasksTotal"] == 7
    assert get(cluster, "/api/v1/cluster/configuration")["nimbus.stats.freq.secs"] == 1
    (supervisor,) = get(cluster, "/api/v1/supervisor/summary")["supervisors"]
    assert supervisor["host"] == "127.0.0.1" and supervisor["slotsTotal"] == 2
    assert supervisor["uptimeSeconds"] >= 0 and supervisor["uptime"]
    nimbuses = get(cluster, "/api/v1/nimbus/summary")["nimbuses"]
    assert sorted(n["status"] for n in nimbuses) == ["Leader", "Not a Leader"]
    assert {n["port"] for n in nimbuses} == set(cluster.nimbus_ports)
    (topology,) = get(cluster, "/api/v1/topology/summary")["topologies"]
    assert topology["name"] == "WordCount" and topology["id"].startswith("WordCount-")
    assert (topology["status"], topology["workersTotal"], topology["executorsTotal"]) == ("ACTIVE", 2, 7)
    # Squall's own API is still there, unchanged
    assert get(cluster, "/api/v1/topologies")[0]["name"] == "WordCount"


def test_the_topology_page_shows_live_numbers_that_grow(cluster: DevCluster) -> None:
    ident = topology_id(cluster)
    first = flowing(cluster, ident)
    assert first["id"] == ident and first["windowHint"] == "10m 0s" and first["msgTimeout"] == 30
    assert {s["spoutId"] for s in first["spouts"]} == {"sentences"}
    assert {b["boltId"] for b in first["bolts"]} == {"split", "count"}
    windows = [s["windowPretty"] for s in first["topologyStats"]]
    assert windows == ["10m 0s", "3h 0m 0s", "1d 0h 0m 0s", "All time"]
    assert sorted(w["port"] for w in first["workers"]) == sorted(
        w["port"] for w in get(cluster, f"/api/v1/topology-workers/{ident}")["hostPortList"])
    # the plain name works as :id too, and the numbers keep growing
    poll_for(lambda: get(cluster, "/api/v1/topology/WordCount?window=600")["topologyStats"][0]["acked"]
             > first["topologyStats"][0]["acked"], timeout=30, interval=0.2, message="more acked trees")


def test_the_topology_page_shows_each_workers_system(cluster: DevCluster) -> None:
    ident = topology_id(cluster)

    def sampled() -> Any:
        workers = get(cluster, f"/api/v1/topology/{ident}?window=600")["workers"]
        return all(isinstance(w["cpuPercent"], (int, float)) for w in workers) and workers

    workers = poll_for(sampled, timeout=30, interval=0.2, message="two samples of every worker")
    assert len(workers) == 2
    for w in workers:
        assert w["rssBytes"] > 10 * 2**20 and w["threads"] > 3 and w["cpuPercent"] >= 0
        assert w["gcPercent"] >= 0 and len(w["gcCollections"]) == 3
        assert w["queueDepth"] >= 0 and isinstance(w["backpressure"], bool)
        assert w["framesSent"] >= 0 and w["framesDropped"] >= 0


def test_the_component_page_of_split(cluster: DevCluster) -> None:
    ident = topology_id(cluster)
    flowing(cluster, ident)
    page = get(cluster, f"/api/v1/topology/{ident}/component/split?window=600")
    assert (page["id"], page["componentType"], page["executors"], page["tasks"]) == ("split", "bolt", 2, 2)
    assert len(page["executorStats"]) == 2
    for executor in page["executorStats"]:
        assert executor["id"].startswith("[") and executor["host"] == "127.0.0.1" and executor["port"]
    (inp,) = page["inputStats"]
    assert (inp["component"], inp["stream"]) == ("sentences", "default") and inp["executed"] > 0
    (out,) = page["outputStats"]
    assert out["stream"] == "default" and out["emitted"] > 0 and out["transferred"] == out["emitted"]
    metrics = get(cluster, f"/api/v1/topology/{ident}/metrics?window=600")
    split = next(b for b in metrics["bolts"] if b["id"] == "split")
    assert split["executed"][0]["component_id"] == "sentences" and split["emitted"][0]["value"] > 0


def test_bad_requests_are_refused_clearly(cluster: DevCluster) -> None:
    status, body = call(cluster, "/api/v1/topology/WordCount?window=60")
    assert status == 400 and "window must be one of 600, 10800, 86400, :all-time" in body["error"]
    status, body = call(cluster, "/api/v1/topology/nosuch-1-2?window=600")
    assert status == 404 and "nosuch-1-2" in body["error"]
    status, body = call(cluster, "/api/v1/topology/WordCount/component/no%2Fsuch")
    assert status == 404 and "'no/such'" in body["error"]
    status, _ = call(cluster, "/api/v1/topology/WordCount/activate")
    assert status == 405
    status, body = call(cluster, "/api/v1/topology/WordCount/kill/soon", method="POST")
    assert status == 400 and "whole seconds" in body["error"]


def raw_post(cluster: DevCluster, url: str, path: str, body: bytes, length: str) -> tuple[int, Any]:
    """A POST with a Content-Length of our choosing (urllib would compute it)."""
    host, port = url.split("://")[1].split(":")
    token, context = credentials(cluster.conf)
    conn = http.client.HTTPSConnection(host, int(port), timeout=10, context=context)
    try:
        conn.putrequest("POST", path)
        conn.putheader("Authorization", f"Bearer {token}")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", length)
        conn.endheaders()
        conn.send(body)
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        conn.close()


def test_malformed_requests_get_400_not_500_and_change_nothing(cluster: DevCluster) -> None:
    kill = "/api/v1/topologies/WordCount/kill"
    leader = cluster.api("GET", "cluster")["leader"]  # only the leader acts (a standby answers 503)
    for length in ("-1", "abc", "1e3", "0x10"):
        status, body = raw_post(cluster, leader, kill, b"{}", length)
        assert status == 400 and "Content-Length" in body["error"], (length, status, body)
    status, body = raw_post(cluster, leader, kill, b"[" * 100_000 + b"]" * 100_000, str(200_000))
    assert status == 400 and "not valid JSON" in body["error"]
    status, body = raw_post(cluster, leader, kill, b'{"wait_secs": 1}\xff', "17")
    assert status == 400 and "not valid JSON" in body["error"]
    for wait in (b"NaN", b"Infinity", b"-1"):
        payload = b'{"wait_secs": ' + wait + b"}"
        status, body = raw_post(cluster, leader, kill, payload, str(len(payload)))
        assert status == 400 and "wait_secs" in body["error"], (wait, status, body)
    # and the topology is still there, active
    summary = get(cluster, "/api/v1/topology/summary")["topologies"]
    (topology,) = [t for t in summary if t["name"] == "WordCount"]
    assert topology["status"] == "ACTIVE"


def test_storms_actions_drive_the_topology(cluster: DevCluster) -> None:
    ident = topology_id(cluster)
    nimbuses = {n["status"]: f"{cluster.scheme}://{n['host']}:{n['port']}"
                for n in get(cluster, "/api/v1/nimbus/summary")["nimbuses"]}
    leader = nimbuses["Leader"]

    def status() -> Any:
        return get(cluster, "/api/v1/topology/summary")["topologies"]

    # a standby refuses, naming the leader
    code, body = call(cluster, f"/api/v1/topology/{ident}/deactivate", "POST", url=nimbuses["Not a Leader"])
    assert code == 503 and body["leader"] == leader
    act = partial(call, cluster, url=leader)
    code, body = act(f"/api/v1/topology/{ident}/deactivate", "POST")
    assert code == 200
    assert body == {"topologyOperation": "deactivate", "topologyId": ident, "status": "success"}
    assert status()[0]["status"] == "INACTIVE"
    assert act(f"/api/v1/topology/{ident}/activate", "POST")[0] == 200
    assert status()[0]["status"] == "ACTIVE"
    code, body = act(f"/api/v1/topology/{ident}/rebalance/0", "POST",
                     body={"rebalanceOptions": {"numWorkers": 1, "executors": {"split": "1"}}})
    assert code == 200 and body["topologyOperation"] == "rebalance"
    poll_for(lambda: status()[0]["workersTotal"] == 1, timeout=30, interval=0.2, message="one worker")
    split = get(cluster, f"/api/v1/topology/{ident}/component/split")
    assert split["executors"] == 1 and split["tasks"] == 2
    code, body = act(f"/api/v1/topology/{ident}/kill/0", "POST")
    assert code == 200 and body["topologyOperation"] == "kill"
    poll_for(lambda: status() == [], timeout=30, interval=0.2, message="the topology removed")
    assert act(f"/api/v1/topology/{ident}")[0] == 404


def test_storms_resource_figures_for_supervisors_topologies_and_workers() -> None:
    supervisors = {"n1": {"host": "h1", "ports": [6700, 6701], "memory_mb": 2048.0, "cpu": 200.0},
                   "n2": {"host": "h2", "ports": [6700]}}
    answer = api.supervisor_summary(supervisors, {}, set(), "v", 1000.0, {"n1": (696.0, 30.0)})
    n1, n2 = answer["supervisors"]
    assert (n1["totalMem"], n1["usedMem"], n1["availMem"]) == (2048.0, 696.0, 1352.0)
    assert (n1["totalCpu"], n1["usedCpu"], n1["availCpu"]) == (200.0, 30.0, 170.0)
    assert n2["totalMem"] is None and n2["availMem"] is None and n2["usedMem"] == 0
    assert answer["schedulerDisplayResource"] is True
    view = _view()
    assert "schedulerInfo" not in api.topology_entry(view, 1010.0)  # the even scheduler's
    view.requested = (900.0, 40.0)
    view.workers[0].update(memory_mb=696.0, cpu=30.0)
    entry = api.topology_entry(view, 1010.0)
    assert entry["schedulerInfo"] == "Fully Scheduled"
    assert (entry["requestedTotalMem"], entry["assignedTotalMem"]) == (900.0, 696.0)
    assert entry["assignedCpu"] == 30.0
    assert api.topology_page(view, "600", 1010.0)["workers"][0]["assignedMemOnHeap"] == 696.0
    view.scheduler_info, view.workers = "needs 1 worker of 596 MB", []
    assert api.topology_entry(view, 1010.0)["schedulerInfo"] == "needs 1 worker of 596 MB"
