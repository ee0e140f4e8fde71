"""DRPC in local mode: Storm's DRPC integration tests (DRPCIntegrationTest: flow, builder,
coordination, the tricky coordination, a failing finished_id) with their exact answers,
and the failure cases, on real local workers, queues and the acker."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from squall import Grouping, LocalCluster, Spout, Topology, TopologyValidationError
from squall.cli.args import load_topology
from squall.drpc import (
    DRPCExecutionError,
    DRPCInvocations,
    DRPCSpout,
    LinearDRPCTopologyBuilder,
    LocalDRPC,
    ReturnResults,
)
from tests.drpc.topologies import (
    CountAggregator,
    CreateTuples,
    EmitFinish,
    ExclamationBolt,
    ExclamationBoltDrpc,
    FailFinishBolt,
    FailingBolt,
    IdBolt,
    NoIdBolt,
    PartialCount,
    PartialUniquer,
    ReachFollowers,
)

FAST = 5.0  # a failed request is answered at once (the spout fails it), never at its timeout


@pytest.fixture
def drpc() -> Iterator[LocalDRPC]:
    with LocalDRPC() as server:
        yield server


def test_drpc_flow_a_plain_topology_between_drpc_spout_and_return_results(cluster: LocalCluster,
                                                                          drpc: LocalDRPC) -> None:
    # Storm's testDrpcFlow
    spout = DRPCSpout.spec(function="test", local_drpc=drpc)
    bolt = ExclamationBolt.spec(inputs=[spout])
    topology = Topology.from_specs("Flow", {"1": spout, "2": bolt,
                                            "3": ReturnResults.spec(inputs={bolt: Grouping.GLOBAL})})
    cluster.submit("test", topology)
    assert drpc.execute("test", "aaa") == "aaa!!!"
    assert drpc.execute("test", "b") == "b!!!"
    assert drpc.execute("test", "c") == "c!!!"


@pytest.mark.parametrize("workers", [1, 2])
def test_drpc_builder(cluster: LocalCluster, drpc: LocalDRPC, workers: int) -> None:
    # Storm's testDrpcBuilder (two workers: every hop may cross the wire)
    builder = LinearDRPCTopologyBuilder("test")
    builder.add_bolt(ExclamationBoltDrpc, 3)
    cluster.submit("builder-test", builder.create_local_topology(drpc), {"topology.workers": workers})
    assert drpc.execute("test", "aaa") == "aaa!!!"
    assert drpc.execute("test", "b") == "b!!!"
    assert drpc.execute("test", "c") == "c!!!"


@pytest.mark.parametrize("workers", [1, 2])
def test_drpc_coordination_counts_every_tuple_of_a_request_through_the_chain(
        cluster: LocalCluster, drpc: LocalDRPC, workers: int) -> None:
    # Storm's testDrpcCoordination: N -> N*N tuples, partial counts at each task once it has
    # all its tuples of the request, summed once every partial count is in.
    builder = LinearDRPCTopologyBuilder("square")
    builder.add_bolt(CreateTuples, 3)
    builder.add_bolt(PartialCount, 3).shuffle_grouping()
    builder.add_bolt(CountAggregator, 3).fields_grouping(["request"])
    cluster.submit("squared", builder.create_local_topology(drpc), {"topology.workers": workers})
    assert drpc.execute("square", "2") == "4"
    assert drpc.execute("square", "10") == "100"
    assert drpc.execute("square", "1") == "1"
    assert drpc.execute("square", "0") == "0"  # no tuple at all: the zero counts finish it


def test_drpc_coordination_tricky(cluster: LocalCluster, drpc: LocalDRPC) -> None:
    # Storm's testDrpcCoordinationTricky: finished_id of a last bolt that emitted nothing else
    builder = LinearDRPCTopologyBuilder("tricky")
    builder.add_bolt(IdBolt, 3)
    builder.add_bolt(IdBolt, 3).shuffle_grouping()
    builder.add_bolt(EmitFinish, 3).fields_grouping("request")
    cluster.submit("tricky", builder.create_local_topology(drpc))
    assert drpc.execute("tricky", "2") == "done"
    assert drpc.execute("tricky", "3") == "done"
    assert drpc.execute("tricky", "4") == "done"


def test_a_lone_bolt_with_finished_id_gets_its_request_and_its_id_on_one_task(cluster: LocalCluster,
                                                                            drpc: LocalDRPC) -> None:
    # (Storm shuffles the request to the first bolt and groups its id by request: the two may
    # part, and finished_id then runs on a task that never saw the request)
    builder = LinearDRPCTopologyBuilder("lone")
    builder.add_bolt(EmitFinish, 3)
    cluster.submit("lone", builder.create_local_topology(drpc))
    assert [drpc.execute("lone", str(i)) for i in range(6)] == ["done"] * 6


def test_drpc_fail_finish_fails_the_request_at_once(cluster: LocalCluster, drpc: LocalDRPC) -> None:
    # Storm's testDrpcFailFinish: FailedException in finished_id
    builder = LinearDRPCTopologyBuilder("fail2")
    builder.add_bolt(FailFinishBolt, 3)
    cluster.submit("fail2", builder.create_local_topology(drpc))
    for args in ("2", "3"):
        started = time.monotonic()
        with pytest.raises(DRPCExecutionError) as raised:
            drpc.execute("fail2", args)
        assert time.monotonic() - started < FAST
        assert raised.value.type == "FAILED_REQUEST"
        assert "tuple tree failed" in str(raised.value)


def test_a_bolt_failing_a_tuple_fails_that_request_only(cluster: LocalCluster, drpc: LocalDRPC) -> None:
    builder = LinearDRPCTopologyBuilder("maybe")
    builder.add_bolt(FailingBolt, 2)
    cluster.submit("maybe", builder.create_local_topology(drpc))
    assert drpc.execute("maybe", "fine") == "fine"
    with pytest.raises(DRPCExecutionError, match="failed") as raised:
        drpc.execute("maybe", "fail")
    assert raised.value.type == "FAILED_REQUEST"
    assert drpc.execute("maybe", "again") == "again"


def test_a_tuple_without_the_request_id_first_fails_its_request_and_says_why(cluster: LocalCluster,
                                                                             drpc: LocalDRPC) -> None:
    builder = LinearDRPCTopologyBuilder("noid")
    builder.add_bolt(NoIdBolt)
    cluster.submit("noid", builder.create_local_topology(drpc))
    with pytest.raises(DRPCExecutionError):
        drpc.execute("noid", "x")
    errors = cluster.errors("noid")
    assert errors and "the first value of every tuple is the id of a request" in errors[0].error


def test_a_request_nobody_serves_times_out_with_the_servers_reason() -> None:
    with LocalDRPC({"drpc.request.timeout.secs": 0.3}) as drpc:
        with pytest.raises(DRPCExecutionError) as raised:
            drpc.execute("nobody", "x")
        assert raised.value.type == "SERVER_TIMEOUT"
        assert "no topology fetched it" in str(raised.value)
        # Storm's testDequeueAfterTimeout: it is gone from the queue.
        assert drpc.fetch_request("nobody") is None


def test_sixteen_concurrent_clients_get_their_own_answers(cluster: LocalCluster, drpc: LocalDRPC) -> None:
    # Storm's reach, in the shape Distributed-RPC.md draws it: followers fanned out,
    # uniqued per task by follower, partial counts summed.
    builder = LinearDRPCTopologyBuilder("reach")
    builder.add_bolt(ReachFollowers, 2)
    builder.add_bolt(PartialUniquer, 3).fields_grouping(["id", "follower"])
    builder.add_bolt(CountAggregator, 2).fields_grouping(["id"])
    cluster.submit("reach", builder.create_local_topology(drpc), {"topology.workers": 2})
    answers: dict[int, str] = {}

    def client(i: int) -> None:
        for n in range(i, i + 3):
            answers[n * 100 + i] = drpc.execute("reach", str(n))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert answers == {n * 100 + i: str(n) for i in range(16) for n in range(i, i + 3)}


def test_a_shut_down_local_drpc_answers_its_waiting_clients() -> None:
    drpc = LocalDRPC()
    outcome: list[BaseException] = []

    def client() -> None:
        try:
            drpc.execute("f", "x")
        except DRPCExecutionError as e:
            outcome.append(e)

    thread = threading.Thread(target=client)
    thread.start()
    while not drpc.core.queues:
        time.sleep(0.01)
    drpc.shutdown()
    thread.join(10)
    assert [e.type for e in outcome] == ["SERVER_SHUTDOWN"]  # type: ignore[attr-defined]


# -- the invocations API, as another spout (a Trident DRPC stream) uses it ------------------------


class UpperSpout(Spout):
    """Fetches requests itself and answers at once: the API DRPCSpout is built on."""

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.invocations = DRPCInvocations.for_task(conf, context, self.options["local_drpc"])

    def next_tuple(self) -> None:
        request = self.invocations.fetch_request("upper", timeout=0.05)
        if request is None:
            return
        if request.func_args == "fail":
            self.invocations.fail_request(request.return_info, "asked to")
        else:
            self.invocations.result(request.return_info, request.func_args.upper())

    def close(self) -> None:
        self.invocations.close()


def test_the_invocations_api_fetches_answers_and_fails_from_any_spout(cluster: LocalCluster,
                                                                     drpc: LocalDRPC) -> None:
    spout = UpperSpout.spec(local_drpc=drpc.service_id)
    cluster.submit("upper", Topology.from_specs("Upper", {"spout": spout}))
    assert drpc.execute("upper", "shout") == "SHOUT"
    with pytest.raises(DRPCExecutionError, match="asked to"):
        drpc.execute("upper", "fail")


def test_local_drpc_blocking_calls_as_storms_drpc_test() -> None:
    # Storm's DRPCTest: testGoodBlocking and testFailedBlocking, on the LocalDRPC's own API
    with LocalDRPC() as drpc:
        results: list[Any] = []
        thread = threading.Thread(target=lambda: results.append(drpc.execute("testing", "test")))
        thread.start()
        found = drpc.fetch_request("testing", timeout=5)
        assert found is not None and found[1] == "test"
        drpc.result(found[0], "tested")
        thread.join(5)
        assert results == ["tested"]

        errors: list[DRPCExecutionError] = []

        def failing() -> None:
            try:
                drpc.execute("testing", "test")
            except DRPCExecutionError as e:
                errors.append(e)

        thread = threading.Thread(target=failing)
        thread.start()
        found = drpc.fetch_request("testing", timeout=5)
        assert found is not None
        drpc.fail_request(found[0])
        thread.join(5)
        assert [e.type for e in errors] == ["FAILED_REQUEST"]


# -- definitions -----------------------------------------------------------------------------------


def test_the_linear_builder_checks_its_chain_when_the_topology_is_made(drpc: LocalDRPC) -> None:
    with pytest.raises(TopologyValidationError, match="add at least one bolt"):
        LinearDRPCTopologyBuilder("f").create_local_topology(drpc)
    builder = LinearDRPCTopologyBuilder("f")
    builder.add_bolt(CreateTuples)  # its one stream has one field
    with pytest.raises(TopologyValidationError, match="exactly two fields: the request id, then the result"):
        builder.create_local_topology(drpc)
    with pytest.raises(TopologyValidationError, match="is not a Bolt subclass"):
        LinearDRPCTopologyBuilder("f").add_bolt(object)
    with pytest.raises(TopologyValidationError, match="function= names the DRPC function"):
        DRPCSpout.spec()
    with pytest.raises(TopologyValidationError, match="needs the LocalDRPC"):
        LinearDRPCTopologyBuilder("f").create_local_topology(None)


def test_a_remote_topology_without_drpc_servers_says_where_to_name_them() -> None:
    builder = LinearDRPCTopologyBuilder("f")
    builder.add_bolt(ExclamationBoltDrpc)
    with LocalCluster() as cluster:
        cluster.submit("remote", builder.create_remote_topology(), {"squall.secure": False})
        errors: list[Any] = []
        deadline = time.monotonic() + 10
        while not errors and time.monotonic() < deadline:
            errors = cluster.errors("remote")
            time.sleep(0.05)
    assert errors and "no DRPC servers configured (drpc.servers)" in errors[0].error


def test_a_file_assigning_a_linear_drpc_topology_at_top_level_is_a_topology_file(tmp_path: Path) -> None:
    file = tmp_path / "exclaim_drpc.py"
    file.write_text(
        "from squall import BasicBolt\n"
        "from squall.drpc import LinearDRPCTopologyBuilder\n\n"
        "class Exclaim(BasicBolt):\n"
        "    outputs = ['id', 'result']\n\n"
        "    def process(self, tup):\n"
        "        self.emit([tup.values[0], tup.values[1] + '!'])\n\n"
        "builder = LinearDRPCTopologyBuilder('exclamation')\n"
        "builder.add_bolt(Exclaim, 2)\n"
        "Exclamation = builder.create_remote_topology()\n")
    topology = load_topology(str(file))
    components = topology.definition().components
    assert sorted(components) == ["bolt0", "bolt1", "bolt2", "prepare-request", "spout"]
    assert components["spout"].options["function"] == "exclamation"
    assert components["bolt0"].options["bolt"].__module__ == "exclaim_drpc"
