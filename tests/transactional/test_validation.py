"""Transactional topologies refuse bad input: at definition time (the class
statement raises TopologyValidationError naming the problem) wherever the
class body says enough, and as a clear reported error where only the
running topology can know."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from squall import (
    Bolt,
    FailedException,
    Grouping,
    LocalCluster,
    Spout,
    Stream,
    Topology,
    TopologyValidationError,
)
from squall.state import OpaqueValue
from squall.testing import poll_for
from squall.transactional import (
    BatchBolt,
    Committer,
    MemoryTransactionalSpout,
    OpaqueMemoryTransactionalSpout,
    TransactionalSpout,
    TransactionalTopology,
)
from tests.transactional.topologies import BatchSum, OpaqueTotal, Run

DATA = [[[1], [2], [3]], [[4], [5]]]


def memory_spout(**kwargs: Any) -> Any:
    return MemoryTransactionalSpout.spec(data=DATA, fields=["n"], **kwargs)


class Partial(BatchBolt):
    outputs = ["tx", "sum"]


class PlainSpout(Spout):
    outputs = ["x"]


class PlainBolt(Bolt):
    outputs = ["tx", "x"]

    def process(self, tup: Any) -> None:
        self.emit([tup.values[0], 1])


# -- the spout: exactly one, and a transactional one -----------------------------------


def test_a_transactional_topology_without_a_transactional_spout_is_refused() -> None:
    with pytest.raises(TopologyValidationError, match="needs exactly one transactional spout, got 0"):
        class NoSpout(TransactionalTopology):
            partial = Partial.spec(inputs=["elsewhere"])


def test_a_transactional_topology_with_two_transactional_spouts_is_refused() -> None:
    with pytest.raises(TopologyValidationError,
                       match=r"needs exactly one transactional spout, got 2 \(\['one', 'two'\]\)"):
        class TwoSpouts(TransactionalTopology):
            one = memory_spout()
            two = memory_spout()
            partial = Partial.spec(inputs=[one, two])


def test_a_plain_spout_in_a_transactional_topology_is_refused() -> None:
    with pytest.raises(TopologyValidationError, match=r"\['plain'\] are not transactional spouts"):
        class WithPlainSpout(TransactionalTopology):
            spout = memory_spout()
            plain = PlainSpout.spec()
            partial = Partial.spec(inputs=[spout])


def test_a_transactional_spout_cannot_have_inputs() -> None:
    with pytest.raises(TopologyValidationError, match="transactional spout Counting cannot have inputs"):
        Counting.spec(inputs=["x"])


@pytest.mark.parametrize("spout", [MemoryTransactionalSpout, OpaqueMemoryTransactionalSpout])
def test_a_memory_spout_cannot_have_inputs(spout: Any) -> None:
    with pytest.raises(TopologyValidationError, match="cannot have inputs"):
        spout.spec(data=DATA, fields=["n"], inputs=["x"])


# -- streams: the first field carries the attempt ------------------------------------------


def test_a_committer_whose_stream_declares_no_fields_is_refused() -> None:
    class FieldlessCommitter(Committer, BatchBolt):
        outputs = [Stream([], name="default")]

    with pytest.raises(TopologyValidationError,
                       match=r"'commit'.*declares no fields.*first field.*TransactionAttempt"):
        class Fieldless(TransactionalTopology):
            spout = memory_spout()
            commit = FieldlessCommitter.spec(inputs=[spout])


def test_a_user_stream_named_with_a_dollar_is_refused() -> None:
    class Dollar(BatchBolt):
        outputs = [Stream(["tx", "x"], name="$mine")]

    with pytest.raises(TopologyValidationError, match="stream names starting with '\\$' are internal"):
        class DollarStream(TransactionalTopology):
            spout = memory_spout()
            partial = Dollar.spec(inputs=[spout])


def test_subscribing_to_an_internal_stream_is_refused() -> None:
    with pytest.raises(TopologyValidationError, match=r"stream '\$batch' of 'spout' is internal"):
        class ReadsInternals(TransactionalTopology):
            spout = memory_spout()
            partial = Partial.spec(inputs=[spout["$batch"]])


# -- committers are batch bolts --------------------------------------------------------------


def test_spec_committer_true_on_a_plain_bolt_is_refused() -> None:
    with pytest.raises(TopologyValidationError, match="only a BatchBolt can be a committer"):
        class PlainCommitter(TransactionalTopology):
            spout = memory_spout()
            commit = PlainBolt.spec(inputs=[spout], committer=True)


def test_the_committer_mixin_on_a_plain_bolt_is_refused() -> None:
    class PlainMixin(Committer, PlainBolt):
        pass

    with pytest.raises(TopologyValidationError, match="'commit': only a BatchBolt can be a committer"):
        class MixinCommitter(TransactionalTopology):
            spout = memory_spout()
            commit = PlainMixin.spec(inputs=[spout])


def test_spec_committer_true_on_a_batch_bolt_makes_it_a_committer() -> None:
    # The accepted counterpart of the refusals above
    class Accepted(TransactionalTopology):
        spout = memory_spout()
        partial = Partial.spec(inputs=[spout])
        commit = Partial.spec(inputs=[partial], committer=True)

    components = Accepted.definition().components
    assert components["commit"].options["committer"] is True
    assert components["partial"].options["committer"] is False


# -- the memory spouts check their data when placed ------------------------------------------


@pytest.mark.parametrize("spout", [MemoryTransactionalSpout, OpaqueMemoryTransactionalSpout])
@pytest.mark.parametrize("take", [0, -1, True, 1.5, "2"])
def test_memory_spout_take_per_batch_must_be_a_positive_integer(spout: Any, take: Any) -> None:
    with pytest.raises(TopologyValidationError,
                       match=f"{spout.__name__}.spec: take_per_batch must be an integer >= 1, got {take!r}"):
        spout.spec(data=DATA, fields=["n"], take_per_batch=take)


@pytest.mark.parametrize(("data", "problem"), [
    ([[[1, 2]]], r"partition 0 item 0 must be a list of 1 values for fields \['n'\], got \[1, 2\]"),
    ([[[1]], [[2], []]], r"partition 1 item 1 must be a list of 1 values"),
    ([[[1]], [3]], r"partition 1 item 0 must be a list of 1 values for fields \['n'\], got 3"),
    ([[1, 2]], r"partition 0 item 0 must be a list of 1 values"),
    ([[[1]], 5], "data must be a list of partitions, each a list of value lists"),
    ("abc", "data must be a list of partitions"),
])
def test_memory_spout_data_of_the_wrong_shape_is_refused(data: Any, problem: str) -> None:
    with pytest.raises(TopologyValidationError, match=problem):
        MemoryTransactionalSpout.spec(data=data, fields=["n"])


@pytest.mark.parametrize("value", [{1, 2}, object(), b"bytes"])
def test_memory_spout_data_that_is_not_json_able_is_refused(value: Any) -> None:
    with pytest.raises(TopologyValidationError, match=r"data must be JSON-able.*not JSON serializable"):
        OpaqueMemoryTransactionalSpout.spec(data=[[[1], [value]]], fields=["n"])


# -- the graph ----------------------------------------------------------------------------------


def test_a_cycle_between_bolts_is_refused() -> None:
    with pytest.raises(TopologyValidationError, match=r"form a cycle \((a -> b -> a|b -> a -> b)\)"):
        class Cycle(TransactionalTopology):
            spout = memory_spout()
            a = Partial.spec(inputs=[spout, "b"])
            b = Partial.spec(inputs=["a"])


def test_a_bolt_reading_itself_is_a_cycle() -> None:
    with pytest.raises(TopologyValidationError, match=r"form a cycle \(a -> a\)"):
        class SelfLoop(TransactionalTopology):
            spout = memory_spout()
            a = Partial.spec(inputs=[spout, "a"])


def test_a_bolt_with_no_inputs_is_refused() -> None:
    with pytest.raises(TopologyValidationError, match="component 'lonely': a bolt needs inputs"):
        class NoInputs(TransactionalTopology):
            spout = memory_spout()
            lonely = Partial.spec()


def test_an_input_that_names_no_component_is_refused() -> None:
    with pytest.raises(TopologyValidationError, match="nowhere"):
        class Dangling(TransactionalTopology):
            spout = memory_spout()
            partial = Partial.spec(inputs=["nowhere"])


def test_no_ackers_in_the_class_config_is_refused() -> None:
    with pytest.raises(TopologyValidationError, match=r"topology\.acker\.executors is 0"):
        class NoAckers(TransactionalTopology):
            config = {"topology.acker.executors": 0}
            spout = memory_spout()
            partial = Partial.spec(inputs=[spout])


def test_a_component_named_like_the_coordinator_is_refused() -> None:
    with pytest.raises(TopologyValidationError, match="'spout/coordinator' is the spout's coordinator"):
        class Impostor(TransactionalTopology):
            spout = memory_spout()
            partial = Partial.spec(inputs=[spout], name="spout/coordinator")


@pytest.mark.parametrize("tid", ["", "a/b", 7])
def test_an_invalid_transactional_id_is_refused(tid: Any) -> None:
    with pytest.raises(TopologyValidationError, match="transactional_id must be a non-empty string"):
        type("BadId", (TransactionalTopology,),
             {"transactional_id": tid, "spout": memory_spout(), "partial": Partial.spec(inputs=["spout"])})


# -- transactional components outside a transactional topology ------------------------------------


def test_a_transactional_spout_in_a_plain_topology_is_refused() -> None:
    with pytest.raises(TopologyValidationError,
                       match=r"MemoryTransactionalSpout is a transactional component; "
                             r"it belongs in a squall\.transactional\.TransactionalTopology"):
        class PlainWithTxSpout(Topology):
            spout = memory_spout()
            bolt = PlainBolt.spec(inputs=[spout])


def test_a_batch_bolt_in_a_plain_topology_is_refused() -> None:
    with pytest.raises(TopologyValidationError,
                       match=r"Partial is a transactional component; "
                             r"it belongs in a squall\.transactional\.TransactionalTopology"):
        class PlainWithBatchBolt(Topology):
            spout = PlainSpout.spec()
            partial = Partial.spec(inputs=[spout])


# -- at run time --------------------------------------------------------------------------------

TXIDS = 4  # transactions the counting spout starts
PER_BATCH = 3


def batch_values(txid: int) -> list[int]:
    return [txid * 10 + i for i in range(PER_BATCH)]


EXPECTED_TOTAL = sum(v for txid in range(1, TXIDS + 1) for v in batch_values(txid))


class Counting(TransactionalSpout):
    """A minimal TransactionalSpout: txid t's metadata is t (or whatever
    ``metadata`` makes of it); emitter task 0 emits the batch."""

    outputs = ["tx", "n"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.started = 0

    def is_ready(self) -> bool:
        return self.started < TXIDS

    def metadata(self, txid: int) -> Any:
        return txid

    def initialize_transaction(self, txid: int, prev: Any) -> Any:
        self.started = txid
        return self.metadata(txid)

    def emit_batch(self, attempt: Any, metadata: Any, emit: Any) -> None:
        if self.context.this_task_index == 0:
            for value in batch_values(metadata):
                emit([attempt, value])


class ObjectMetadata(Counting):
    def metadata(self, txid: int) -> Any:
        return object()


class SetMetadata(Counting):
    def metadata(self, txid: int) -> Any:
        return {"seen": {txid}}


class BadEmit(BatchSum):
    """Sums its batch; on the first attempt of txid 1 it emits without the attempt."""

    def finish_batch(self) -> None:
        if self.run.chance("bad_emit", self.attempt, self.task):
            self.emit([42, self.sum])
        self.emit([self.attempt, self.sum])


class FailFirst(BatchSum):
    """Sums its batch, but fails the first attempt of every txid."""

    def finish_batch(self) -> None:
        if self.run.chance("fail_first", self.attempt, self.task):
            raise FailedException(f"first attempt of txid {self.attempt.txid}")
        self.emit([self.attempt, self.sum])


def counting_topology(spout: type, partial: type) -> type[TransactionalTopology]:
    return type(f"Counting{spout.__name__}{partial.__name__}", (TransactionalTopology,), {
        "config": {"topology.max.spout.pending": 2},
        "spout": (s := spout.spec(par=2)),
        "partial": (p := partial.spec(inputs=[s], par=2)),
        "total": OpaqueTotal.spec(inputs={p: Grouping.global_()}),
    })




@pytest.mark.parametrize("spout", [ObjectMetadata, SetMetadata])
def test_unserializable_metadata_is_reported_as_unstorable(run: Callable[..., Run], spout: type) -> None:
    # Given a transactional spout whose metadata JSON cannot hold
    r = run()
    topology = counting_topology(spout, BatchSum)
    with LocalCluster() as cluster:
        # When it runs
        cluster.submit("bad-meta", topology, {"test.run": r.name})
        # Then the error names the coordinator's metadata and says it cannot be stored
        unstorable = "coordinator metadata for txid 1 cannot be stored as transactional state"
        found = poll_for(lambda: [e for e in cluster.errors("bad-meta") if unstorable in e.error],
                         timeout=10, message="the unstorable metadata error")
        assert "SerializationError" in found[0].error
        # (a spout bug, not an outage: fatal, as any SerializationError is)
        assert found[0].fatal
        assert found[0].component == "spout/coordinator"
        # and nothing was ever processed
        assert not r.partials and not r.commits


def test_an_emit_without_the_attempt_is_a_reported_non_fatal_error(run: Callable[..., Run]) -> None:
    # Given a batch bolt that emits [42, sum] (no attempt first) on txid 1's first attempt
    r = run(bad_emit={"p": 0.0, "txids": [1]})
    topology = counting_topology(Counting, BadEmit)
    with LocalCluster() as cluster:
        runner = cluster.submit("bad-emit", topology, {"test.run": r.name})
        # When the topology runs to its end
        poll_for(lambda: OpaqueValue(r.store, "total").get() == EXPECTED_TOTAL, timeout=20,
                 message="the exact total")
        # Then the bad emit was reported: the first value must be the batch's attempt
        errors = cluster.errors("bad-emit")
        assert r.injected["bad_emit"] == 1
        assert len(errors) == 1, errors
        assert errors[0].component == "partial"
        assert "NotTheAttempt" in errors[0].error
        assert "the first value of every tuple in a transactional topology is the batch's attempt" \
            in errors[0].error
        assert "got 42" in errors[0].error
        # and it was not fatal: no worker restarted, the batch was replayed and counted once
        assert not errors[0].fatal
        assert runner.restarts == 0
    assert sorted(set(r.committed_txids())) == list(range(1, TXIDS + 1))


def test_failed_exception_replays_the_batch_and_is_not_an_error(run: Callable[..., Run]) -> None:
    # Given a batch bolt that raises FailedException on the first attempt of every txid
    r = run(fail_first={"p": 0.0, "txids": list(range(1, TXIDS + 1))})
    topology = counting_topology(Counting, FailFirst)
    with LocalCluster() as cluster:
        runner = cluster.submit("fail-first", topology, {"test.run": r.name})
        # When the topology runs to its end
        poll_for(lambda: OpaqueValue(r.store, "total").get() == EXPECTED_TOTAL, timeout=20,
                 message=f"the exact total (injected: {dict(r.injected)})")
        # Then every txid failed once and was replayed, and the total is exact
        assert r.injected["fail_first"] == TXIDS
        assert [t for t, _a in r.commits] == list(range(1, TXIDS + 1))
        # with no error reported (FailedException is not an error) and no restart
        assert cluster.errors("fail-first") == []
        assert runner.restarts == 0


@pytest.mark.parametrize("where", ["class", "submit"])
def test_an_invalid_topology_transactional_id_is_a_reported_error(run: Callable[..., Run],
                                                                  where: str) -> None:
    # Given topology.transactional.id with a '/' (it names a znode), in the
    # class config or at submit: only the running topology sees the final value
    r = run()
    topology = counting_topology(Counting, BatchSum)
    conf: dict[str, Any] = {"test.run": r.name}
    if where == "class":
        topology = type("SlashedId", (topology,), {"config": {**topology.config,
                                                              "topology.transactional.id": "a/b"}})
    else:
        conf["topology.transactional.id"] = "a/b"
    with LocalCluster() as cluster:
        # When it runs
        cluster.submit("slashed-id", topology, conf)
        # Then the error names the id and what is wrong with it
        poll_for(lambda: [e for e in cluster.errors("slashed-id")
                          if "transactional id 'a/b' must be a non-empty name without '/'" in e.error],
                 timeout=10, message="the invalid transactional id error")
        assert not r.partials and not r.commits
