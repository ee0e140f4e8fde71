"""`squall set_log_level` on a real dev cluster: a component's debug lines appear in its
worker's log and go again -- on reset, or when their time has come -- with the worker
never relaunched; Storm's REST logconfig shows what is set (issue 30).  And `squall debug`
on the same cluster: a component's emitted tuples appear in its worker's events.log, read
through the logviewer, and stop, with the worker never relaunched either (issue 50)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from squall.cli.devcluster import DevCluster
from squall.testing import poll_for
from tests.cluster.conftest import TOPOLOGIES, squall_cli, worker_logs

DEBUG, PROGRESS = "chatty debug", "chatty progress"  # events, as a worker's log shows them
TIMEOUT_SECS = 8  # long beside the second or two a change takes to reach the worker
# Longer than any wait here: a change reaches the worker because the supervisor watches it.
SYNC_SECS = 300


def worker_log(cluster: DevCluster) -> str:
    return worker_logs(cluster)


def quiet_after(cluster: DevCluster, said: str, count: int) -> None:
    """Once the worker has said ``said`` ``count`` times: several tuples later, no debug line."""
    poll_for(lambda: worker_log(cluster).count(said) >= count, timeout=60,
             message=f"the worker to say {said}")
    mark = len(worker_log(cluster))  # a line under way as the level went may land just after
    poll_for(lambda: worker_log(cluster)[mark:].count(PROGRESS) >= 3, timeout=60, message="30 more tuples")
    assert DEBUG not in worker_log(cluster)[mark:]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    """One cluster running chatty for the module's tests; the last one kills it."""
    c = DevCluster(tmp_path_factory.mktemp("levels") / "cluster", supervisors=1, slots=1,
                   conf={"supervisor.assignments.sync.secs": SYNC_SECS,
                         "supervisor.run.worker.as.user": False})  # (make_cluster's default)
    try:
        c.start()
        squall_cli(c, "submit", str(TOPOLOGIES / "chatty.py"), "--name", "chatty")
        poll_for(lambda: worker_log(c).count(PROGRESS) >= 3, timeout=90, message="the bolt's progress")
        yield c
    finally:
        c.stop()


def events(cluster: DevCluster, *args: str) -> list[str]:
    """The sampled tuples of chatty's workers, through their logviewer (`squall logs --events`)."""
    out = squall_cli(cluster, "logs", "chatty", "--events", *args).stdout
    return [line.split("  ", 1)[1] for line in out.splitlines() if "  " in line]


def test_a_components_tuples_sampled_into_events_log_and_stopped(cluster: DevCluster) -> None:
    # Given the running topology, nothing sampled
    pids = cluster.worker_pids()
    assert cluster.api("GET", "topology/chatty")["debug"] is False
    # When its bolt is debugged at 100 %: its tuples appear in the worker's events.log, the
    # spout's do not
    out = squall_cli(cluster, "debug", "chatty", "-c", "chatty", "--enable", "--pct", "100").stdout
    assert "debug on: 100 % of the tuples component 'chatty'" in out
    lines = poll_for(lambda: len(got := events(cluster, "-c", "chatty")) >= 5 and got, timeout=60,
                     message="chatty's tuples in events.log")
    fields = lines[-1].split(",")
    assert fields[1:4] == ["chatty", fields[2], "default"] and fields[4] == "" and fields[5].startswith("[")
    assert not [line for line in events(cluster) if ",ticks," in line]
    page = cluster.api("GET", "topology/chatty/component/chatty")
    assert (page["debug"], page["samplingPct"]) == (True, 100.0)
    assert page["eventLogLink"].startswith("https://") and page["eventLogLink"].endswith("%2Fevents.log")
    assert cluster.api("GET", "topology/chatty")["debug"] is False  # the topology-wide setting: untouched
    shown = squall_cli(cluster, "debug", "chatty", "-c", "chatty").stdout
    assert "debug on, 100 % for component 'chatty'" in shown
    # When it is stopped: no new line, once the worker has it
    squall_cli(cluster, "debug", "chatty", "-c", "chatty", "--disable")
    poll_for(lambda: worker_log(cluster).count("event logging set") >= 2, timeout=60, message="debug off")
    seen = len(events(cluster))
    progress = worker_log(cluster).count(PROGRESS)
    poll_for(lambda: worker_log(cluster).count(PROGRESS) >= progress + 2, timeout=60,
             message="20 more tuples")
    assert len(events(cluster)) == seen
    assert cluster.api("GET", "topology/chatty/component/chatty")["debug"] is False
    # And topology-wide: every component follows it but one whose own setting says otherwise
    out = squall_cli(cluster, "debug", "chatty", "--enable", "--pct", "50").stdout
    assert "debug on: 50 % of the tuples every component of topology 'chatty' emits" in out
    page = cluster.api("GET", "topology/chatty")
    assert (page["debug"], page["samplingPct"]) == (True, 50.0)
    assert cluster.api("GET", "topology/chatty/component/ticks")["samplingPct"] == 50.0
    assert cluster.api("GET", "topology/chatty/component/chatty")["debug"] is False
    squall_cli(cluster, "debug", "chatty", "--disable")
    assert cluster.api("GET", "topology/chatty")["debug"] is False
    # Then it was the same worker throughout
    assert cluster.worker_pids() == pids


def test_a_components_level_set_reset_and_expired_on_a_running_worker(cluster: DevCluster) -> None:
    # Given a running topology whose bolt logs every tuple at debug, which its worker hides
    assert DEBUG not in worker_log(cluster)
    pids = cluster.worker_pids()

    # When its level is set until reset: the bolt's debug lines appear, the same worker's
    out = squall_cli(cluster, "set_log_level", "-l", "chatty=DEBUG", "chatty").stdout
    assert "chatty: DEBUG until reset" in out
    poll_for(lambda: DEBUG in worker_log(cluster), timeout=60, message="a debug line")
    assert cluster.api("GET", "topology/chatty/logconfig") == {"namedLoggerLevels": {"chatty": {
        "target_level": "DEBUG", "reset_level": None, "timeout": 0, "timeout_epoch": 0}}}
    # ...and reset, they stop
    out = squall_cli(cluster, "set-log-level", "-r", "chatty", "chatty").stdout
    assert "chatty: back to the workers' own level" in out and "no log levels set" in out
    quiet_after(cluster, "log levels set", 2)

    # When it is set for a while: they appear again, and stop once its time has come
    asked = time.time()
    out = squall_cli(cluster, "set_log_level", "-l", f"chatty=DEBUG:{TIMEOUT_SECS}", "chatty").stdout
    assert "chatty: DEBUG until" in out and f"({TIMEOUT_SECS} s)" in out
    shown = worker_log(cluster).count(DEBUG)
    poll_for(lambda: worker_log(cluster).count(DEBUG) > shown, timeout=60, message="debug lines again")
    level = cluster.api("GET", "topology/chatty/logconfig")["namedLoggerLevels"]["chatty"]
    assert level["timeout"] == TIMEOUT_SECS
    assert asked + TIMEOUT_SECS <= level["timeout_epoch"] / 1000 <= time.time() + TIMEOUT_SECS
    quiet_after(cluster, "log level expired", 1)
    assert cluster.api("GET", "topology/chatty/logconfig") == {"namedLoggerLevels": {}}
    assert "no log levels set on topology chatty" in squall_cli(cluster, "set_log_level", "chatty").stdout

    # Then it was the same worker throughout
    assert cluster.worker_pids() == pids

    # And what cannot be is refused, saying why; a name that matches no component is warned about
    refused = cluster.request("POST", "/api/v1/topology/chatty/logconfig",
                              b'{"namedLoggerLevels": {"ROOT": {"target_level": "LOUD"}}}')
    assert refused.status_code == 400 and "unknown log level 'LOUD'" in refused.json()["error"]
    missing = squall_cli(cluster, "set_log_level", "-l", "ROOT=DEBUG", "nothere", check=False)
    assert missing.returncode == 1 and "nothere" in missing.stderr
    typo = squall_cli(cluster, "set_log_level", "-l", "chaty=DEBUG:1", "chatty")
    assert ("warning: 'chaty' is not a component of topology 'chatty' (its components: chatty, ticks)"
            in typo.stderr)
    squall_cli(cluster, "kill", "chatty", "-w", "60")  # levels set now would outlive it
    killing = squall_cli(cluster, "set_log_level", "-l", "ROOT=DEBUG", "chatty", check=False)
    assert killing.returncode == 1 and "is being killed" in killing.stderr
