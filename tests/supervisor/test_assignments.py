"""Reading assignments as pure decisions: what this node's slots should run, from the
assignments and topology records as plain data (no ZooKeeper), and what the process
sync then does with the slots it finds (launch, kill, keep)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from squall.config import DEFAULTS
from squall.runtime.sandbox import Identity
from squall.supervisor.assignments import (
    assigned_here,
    still_assigned,
    worker_conf,
    worker_defaults,
    workers_of_node,
)
from squall.supervisor.run_as import RunAs, uids_kept
from squall.supervisor.sync import (
    DISALLOWED,
    NOT_RUNNING,
    Kill,
    Launch,
    ProcessSync,
    SlotState,
    WriteAssignment,
)

NODE, HOST = "a", "10.0.0.1"
NOW = 1000.0


def assignment(*workers: tuple[str, int, list[list[int]]], version: int = 1) -> dict[str, Any]:
    return {"workers": [{"node": node, "port": port, "executors": executors}
                        for node, port, executors in workers],
            "hosts": {"a": "10.0.0.1", "b": "10.0.0.2"}, "active": True, "version": version}


def record(name: str) -> dict[str, Any]:
    return {"definition": {"name": name}, "owner": "alice", "conf": {}}


def desired(assignments: dict[str, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """What the assignment sync keeps for this node, port by port (with no localizer:
    every topology's code at /code/<id>, no environment)."""
    out: dict[int, dict[str, Any]] = {}
    for topology_id, a in assigned_here(NODE, assignments).items():
        out.update(workers_of_node(NODE, HOST, topology_id, a, record(topology_id), {},
                                   f"/code/{topology_id}"))
    return out


def running(port: int, want: dict[str, Any] | None, beat_time: float = NOW) -> SlotState:
    """A slot whose live worker runs ``want`` (None: a worker of nothing assigned now),
    beating at ``beat_time``."""
    want = want or {"topology_id": "gone-1", "executors": [[9, 9]]}
    beat = {"topology_id": want["topology_id"], "executors": want["executors"], "time": beat_time,
            "launch": "L"}
    return SlotState(port, running=True, assignment=want, beat=beat, launched=NOW - 5, launch="L")


def test_only_topologies_with_a_worker_on_this_node_are_read() -> None:
    here = assignment(("a", 6700, [[1, 1]]), ("b", 6701, [[2, 2]]))
    elsewhere = assignment(("b", 6700, [[1, 1]]))
    assert assigned_here(NODE, {"t-1": here, "t-2": elsewhere, "t-3": assignment()}) == {"t-1": here}


def test_the_nodes_slots_are_launched_killed_or_kept_as_the_assignments_say() -> None:
    # Given this node's assignments: t-1 on 6700 and 6701, t-2 on 6702, and nothing for 6703
    assignments = {"t-1": assignment(("a", 6700, [[1, 1]]), ("a", 6701, [[2, 2]]), ("b", 6700, [[3, 3]])),
                   "t-2": assignment(("a", 6702, [[1, 2]]), version=4),
                   "t-3": assignment(("b", 6702, [[1, 1]]))}
    wants = desired(assignments)
    assert sorted(wants) == [6700, 6701, 6702]
    assert {port: want["topology_id"] for port, want in wants.items()} == {6700: "t-1", 6701: "t-1",
                                                                           6702: "t-2"}
    # And slots as the supervisor finds them: 6700 empty, 6701 running its worker, 6702 running
    # t-2's worker with an older assignment file, 6703 running a worker nothing assigns any more
    stale = {**wants[6702], "version": 3}
    slots = [SlotState(6700, running=False), running(6701, wants[6701]),
             SlotState(6702, running=True, assignment=stale, beat=running(6702, wants[6702]).beat,
                       launched=NOW - 5, launch="L"),
             running(6703, None)]
    # When the process sync looks at each
    sync = ProcessSync(worker_timeout_secs=30.0, start_timeout_secs=120.0)
    actions = {slot.port: sync.slot(wants.get(slot.port), slot, NOW) for slot in slots}
    # Then the empty slot's worker is launched, the running one kept, the stale one's
    # assignment rewritten (the worker applies it live), and the stray killed
    assert actions == {6700: [Launch(6700, wants[6700], NOT_RUNNING)], 6701: [],
                       6702: [WriteAssignment(6702, wants[6702])], 6703: [Kill(6703, DISALLOWED)]}


def test_a_slot_reassigned_to_other_executors_kills_its_worker_and_launches_the_new_one() -> None:
    before = desired({"t-1": assignment(("a", 6700, [[1, 1]]))})[6700]
    after = desired({"t-1": assignment(("a", 6700, [[1, 2]]), version=2)})[6700]
    sync = ProcessSync(worker_timeout_secs=30.0, start_timeout_secs=120.0)
    assert sync.slot(after, running(6700, before), NOW) == [
        WriteAssignment(6700, after), Kill(6700, DISALLOWED), Launch(6700, after, DISALLOWED)]


def test_a_slot_is_still_assigned_only_with_the_same_executors_on_this_node() -> None:
    current = assignment(("a", 6700, [[1, 2]]), ("b", 6701, [[3, 3]]))
    assert still_assigned(current, NODE, 6700, [[1, 2]])
    assert not still_assigned(current, NODE, 6700, [[1, 1]])  # its executors changed
    assert not still_assigned(current, NODE, 6701, [[3, 3]])  # the slot moved to another node
    assert not still_assigned(current, "b", 6700, [[1, 2]])
    assert not still_assigned(None, NODE, 6700, [[1, 2]])  # the topology is gone


def test_a_workers_conf_is_the_clusters_then_the_topologys_less_what_only_the_cluster_sets() -> None:
    defaults = worker_defaults({**DEFAULTS, "topology.message.timeout.secs": 60,
                                "zmq.hwm": DEFAULTS["zmq.hwm"], "supervisor.slots.ports": [1],
                                "nimbus.seeds": ["x"]})
    # (only what differs from Squall's defaults, and only keys a worker reads)
    assert defaults == {"topology.message.timeout.secs": 60}
    topology = {"topology.message.timeout.secs": 90, "squall.secure": False, "storm.local.dir": "/tmp/x",
                "topology.environment": {"A": "1"}}
    conf = worker_conf(defaults, topology, {"spark.remote": "sc://node"}, True, None)
    assert conf == {"topology.message.timeout.secs": 90, "topology.environment": {"A": "1"},
                    "spark.remote": "sc://node", "squall.secure": True}


def test_a_sandboxed_worker_gets_its_state_directory_unless_its_conf_names_one() -> None:
    run_as = RunAs(Identity(61000, 61000), Path("/local/state/alice/WordCount"))
    assert worker_conf({}, {}, {}, False, run_as)["squall.state.dir"] == "/local/state/alice/WordCount"
    assert worker_conf({}, {"squall.state.dir": "/mine"}, {}, False, run_as)["squall.state.dir"] == "/mine"
    assert "squall.state.dir" not in worker_conf({}, {}, {}, False, None)


def test_a_topologys_environment_gives_its_workers_python() -> None:
    a = assignment(("a", 6700, [[1, 1]]))
    (want,) = workers_of_node(NODE, HOST, "t-1", a, record("t-1"), {}, "/code/t-1", None,
                              "/env/bin/python").values()
    assert want["python"] == "/env/bin/python"
    (plain,) = workers_of_node(NODE, HOST, "t-1", a, record("t-1"), {}, "/code/t-1").values()
    assert "python" not in plain  # the supervisor's own Python


def test_a_uid_is_freed_only_once_its_topology_is_gone_and_no_process_runs_as_it() -> None:
    uids = {"kept-1": 61000, "gone-1": 61001, "stopping-1": 61002}
    assert uids_kept(uids, {"kept-1"}, {61002, None}) == {"kept-1": 61000, "stopping-1": 61002}


def test_a_node_runs_its_own_workers_of_an_assignment_knowing_where_every_task_listens() -> None:
    assignment = {"workers": [{"node": "a", "port": 6700, "executors": [[1, 2]]},
                              {"node": "b", "port": 6701, "executors": [[3, 3], [4, 5]]},
                              {"node": "a", "port": 6702, "executors": [[6, 6]]}],
                  "hosts": {"a": "10.0.0.1", "b": "10.0.0.2"}, "active": False, "version": 7}
    record = {"definition": {"name": "t"}}
    levels = {"ROOT": {"level": "DEBUG", "timeout_secs": 30, "expires_at": 1030.0}}
    debug = {"components": {"split": {"enable": True, "samplingpct": 5.0}}}
    got = workers_of_node("a", "10.0.0.1", "t-1", assignment, record, {"k": 1}, "/code/t-1", levels,
                          debug=debug)
    assert sorted(got) == [6700, 6702]
    assert got[6702]["log_levels"] == levels
    assert got[6702]["debug"] == debug  # applied live by the worker, as the levels are
    first = got[6700]
    assert first["address"] == "zmq+tcp://10.0.0.1:6700" and first["executors"] == [[1, 2]]
    assert first["task_address"] == {"1": "zmq+tcp://10.0.0.1:6700", "2": "zmq+tcp://10.0.0.1:6700",
                                     "3": "zmq+tcp://10.0.0.2:6701", "4": "zmq+tcp://10.0.0.2:6701",
                                     "5": "zmq+tcp://10.0.0.2:6701", "6": "zmq+tcp://10.0.0.1:6702"}
    assert (first["active"], first["version"], first["conf"], first["code_dir"]) == (False, 7, {"k": 1},
                                                                                      "/code/t-1")
    assert workers_of_node("c", "10.0.0.3", "t-1", assignment, record, {}, "/code/t-1") == {}


def test_a_worker_placed_by_resources_gets_its_memory_limit() -> None:
    a = assignment(("a", 6700, [[1, 1]]), ("a", 6701, [[2, 2]]))
    a["workers"][0].update(memory_mb=396.0, cpu=20.0)
    got = workers_of_node(NODE, HOST, "t-1", a, record("t-1"), {}, "/code/t-1")
    assert got[6700]["memory_limit_mb"] == 396.0
    assert "memory_limit_mb" not in got[6701]  # the even scheduler's: no limit
