"""The Spark bolt's pure parts: when batches go, the submit-time budget check,
schemas.  No Spark server needed."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import pytest
import structlog.testing

from squall import Bolt, LocalCluster, Spout, Topology, TopologyValidationError
from squall.spark.batching import Action, Batcher, budget_warnings
from squall.spark.schema import ROW_COLUMN, parse_ddl, schema_json
from squall.worker.plan import plan_topology


def test_a_batch_goes_when_full() -> None:
    b = Batcher(size=3, max_age=10.0, max_size=6)
    assert b.add("a", 0.0) is Action.NONE
    assert b.add("b", 0.1) is Action.NONE
    assert b.add("c", 0.2) is Action.SEND
    items, first = b.take()
    assert (items, first) == (["a", "b", "c"], 0.0)


def test_a_batch_goes_when_old() -> None:
    b = Batcher(size=100, max_age=0.5, max_size=400)
    b.add("a", 1.0)
    assert b.deadline() == 1.5
    assert b.decide(1.4) is Action.NONE
    assert b.add("b", 1.5) is Action.SEND


def test_a_tick_flushes_what_is_pending() -> None:
    b = Batcher(size=100, max_age=60.0, max_size=400)
    assert b.tick(0.0) is Action.NONE  # nothing pending
    b.add("a", 0.0)
    assert b.tick(0.1) is Action.SEND


def test_while_a_job_runs_the_next_batch_grows_then_blocks() -> None:
    # Given a job in flight
    b = Batcher(size=2, max_age=10.0, max_size=4)
    b.add("a", 0.0)
    assert b.add("b", 0.0) is Action.SEND
    b.take()
    # When the next batch fills past its size, it keeps growing
    assert b.add("c", 0.1) is Action.NONE
    assert b.add("d", 0.1) is Action.NONE
    assert b.add("e", 0.1) is Action.NONE
    # Then at max size the bolt must wait for the job
    assert b.add("f", 0.1) is Action.BLOCK
    # And once the job is done the whole grown batch goes at once
    b.done()
    assert b.decide(0.2) is Action.SEND
    assert b.take()[0] == ["c", "d", "e", "f"]


def test_a_tick_during_a_job_flushes_when_it_ends() -> None:
    b = Batcher(size=10, max_age=60.0, max_size=40)
    b.add("a", 0.0)
    b.tick(0.0)
    b.take()
    b.add("b", 0.1)
    assert b.tick(0.1) is Action.NONE  # the job is still running
    b.done()
    assert b.decide(0.2) is Action.SEND


class _Source(Spout):
    outputs = ["x"]


class _Sink(Bolt):
    outputs: list[str] = []

    def process(self, tup: Any) -> None:
        pass


def _spark_topology(config: dict[str, Any]) -> type[Topology]:
    from squall.spark import SparkBolt

    class Noop(SparkBolt):
        schema = "x bigint"
        outputs = ["x"]

    return Topology.from_specs("T", {"src": _Source.spec(), "spark": Noop.spec(inputs=["src"])}, config)


def test_budget_warning_when_batches_come_near_the_message_timeout() -> None:
    near = plan_topology(_spark_topology({"topology.message.timeout.secs": 2,
                                          "spark.bolt.batch.ms": 800}).definition())
    far = plan_topology(_spark_topology({}).definition())
    found = budget_warnings(near)
    assert len(found) == 1 and "'spark'" in found[0] and "2 s" in found[0]
    assert budget_warnings(far) == []


def test_local_cluster_submit_logs_the_budget_warning() -> None:
    topology = _spark_topology({"topology.message.timeout.secs": 1})
    with structlog.testing.capture_logs() as logs, LocalCluster() as cluster:
        # The check runs before anything starts; the bolt never connects.
        cluster.submit("budget", topology, {"topology.workers": 1, "spark.remote": "sc://localhost:1"})
        cluster.deactivate("budget")
    assert [e for e in logs if e["event"] == "submit check warning" and e["check"] == "spark-batching"]


def test_schemas_parse_without_spark() -> None:
    assert schema_json("a string, b BIGINT, c array<double>") == parse_ddl(
        "a: string, b: long, c: array<double>")
    assert [f["name"] for f in schema_json({"user": "string", "n": "int"})["fields"]] == ["user", "n"]
    assert schema_json("d decimal(10, 2) NOT NULL")["fields"][0] == {
        "name": "d", "type": "decimal(10,2)", "nullable": False, "metadata": {}}
    with pytest.raises(TopologyValidationError, match="unknown type"):
        schema_json("a strang")


def test_a_spark_bolt_needs_a_schema() -> None:
    from squall.spark import SparkBolt

    class NoSchema(SparkBolt):
        outputs = ["x"]

    with pytest.raises(TopologyValidationError, match="needs an input schema"):
        NoSchema.spec(inputs=["src"])


def test_batches_become_arrow_column_by_column() -> None:
    pytest.importorskip("pyarrow")
    from squall.spark.schema import BatchSchema

    schema = BatchSchema("user string, amount double, n bigint")
    Values = namedtuple("Values", "n user amount extra")
    table = schema.table([Values(1, "a", 2.5, "x"), Values(2, None, None, "y")])
    assert table.column_names == ["user", "amount", "n", ROW_COLUMN]
    assert table.to_pydict() == {"user": ["a", None], "amount": [2.5, None], "n": [1, 2], ROW_COLUMN: [0, 1]}


def test_budget_warning_when_spouts_cannot_fill_a_batch() -> None:
    plan = plan_topology(_spark_topology({"topology.max.spout.pending": 100,
                                          "spark.bolt.batch.size": 1000}).definition())
    found = budget_warnings(plan)
    assert len(found) == 1 and "only ever be sent by age" in found[0]
