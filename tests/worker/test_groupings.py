"""Stream groupings observed in real local runs.

Every consumer bolt emits ``[its own task id, the value it got]``, so the
captured output of a run shows which task received which tuple.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from typing import Any

import pytest

from squall import Bolt, CustomGrouping, Grouping, Spout, Stream, Topology
from squall.errors import ComponentError
from squall.nimbus.placement import spread
from squall.testing import CompletedTopology, complete_topology, poll_for
from squall.worker.executors import routing
from squall.worker.plan import plan_topology

# -- components ---------------------------------------------------------------


class Words(Spout):
    outputs = ["word"]


class Record(Bolt):
    """Reports which task received which value: emits [task id, value]."""

    outputs = ["task", "word"]

    def process(self, tup: Any) -> None:
        self.emit([self.context.task_id, tup.values[0]])


class RecordWithSource(Bolt):
    """Emits [task id, value, id of the task that emitted the input]."""

    outputs = ["task", "word", "source"]

    def process(self, tup: Any) -> None:
        self.emit([self.context.task_id, tup.values[0], tup.task])


class DirectRouter(Bolt):
    """Sends word "w<i>" straight to consumer task i mod n, and reports
    what ``emit`` returned on the "sent" stream."""

    outputs = [Stream(["x"], name="d", direct=True), Stream(["x", "sent"], name="sent")]

    def process(self, tup: Any) -> None:
        word = tup["word"]
        consumers = self.context.component_tasks["consumer"]
        target = consumers[int(word[1:]) % len(consumers)]
        sent = self.emit([word], stream="d", direct_task=target)
        self.emit([word, list(sent)], stream="sent")


class ForgetfulRouter(Bolt):
    """Emits on a direct stream without naming a task: a bug in the bolt."""

    outputs = [Stream(["x"], name="d", direct=True)]

    def process(self, tup: Any) -> None:
        self.emit([tup["word"]], stream="d")


class MisdirectedRouter(Bolt):
    """Names a task on a stream that is not direct: a bug in the bolt."""

    outputs = ["x"]

    def process(self, tup: Any) -> None:
        self.emit([tup["word"]], direct_task=self.context.component_tasks["consumer"][0])


class Fanout(Bolt):
    """Re-emits each word and reports emit()'s return value on stream "ret"."""

    outputs = [Stream(["word"]), Stream(["word", "targets", "kind"], name="ret")]

    def process(self, tup: Any) -> None:
        targets = self.emit([tup["word"]])
        self.emit([tup["word"], list(targets), type(targets).__name__], stream="ret")


class LastTask(CustomGrouping):
    def choose_tasks(self, task_id: int, values: Any) -> list[int]:
        return [self.target_tasks[-1]]


class NthTask(CustomGrouping):
    def choose_tasks(self, task_id: int, values: Any) -> list[int]:
        return [self.target_tasks[self.args["index"]]]


class BothEnds(CustomGrouping):
    def choose_tasks(self, task_id: int, values: Any) -> list[int]:
        return [self.target_tasks[0], self.target_tasks[-1]]


# -- helpers ------------------------------------------------------------------


def words_input(words: list[str]) -> list[list[str]]:
    return [[w] for w in words]


def task_ids(topology: type[Topology], component: str, conf: dict[str, Any] | None = None) -> list[int]:
    """The task ids the runtime gives ``component`` (same planner as LocalCluster)."""
    return plan_topology(topology.definition(), None, conf).component_tasks[component]


def received(result: CompletedTopology, component: str) -> dict[int, Counter[str]]:
    """task id -> Counter of the values that task received."""
    out: dict[int, Counter[str]] = defaultdict(Counter)
    for row in result[component]:
        out[row[0]][row[1]] += 1
    return dict(out)


def total(per_task: dict[int, Counter[str]]) -> Counter[str]:
    out: Counter[str] = Counter()
    for counts in per_task.values():
        out += counts
    return out


def assert_all_acked(result: CompletedTopology, n: int) -> None:
    assert result.failed == []
    assert result.errors == []
    assert len(result.acked) == n


# -- shuffle / none -----------------------------------------------------------


class ShuffleTopology(Topology):
    words = Words.spec()
    rec = Record.spec(inputs={words: Grouping.shuffle()}, par=3)


class NoneTopology(Topology):
    words = Words.spec()
    rec = Record.spec(inputs={words: Grouping.none()}, par=3)


@pytest.mark.parametrize("topology", [ShuffleTopology, NoneTopology], ids=["shuffle", "none"])
def test_shuffle_and_none_deliver_each_tuple_once_spread_evenly(topology: type[Topology]) -> None:
    words = [f"w{i}" for i in range(30)]
    result = complete_topology(topology, {"words": words_input(words)})

    per_task = received(result, "rec")
    assert total(per_task) == Counter(words)  # every tuple exactly once
    assert set(per_task) == set(task_ids(topology, "rec"))  # every task got some
    # One emitter: shuffle is an even spread (Storm guarantees equal counts).
    assert sorted(sum(c.values()) for c in per_task.values()) == [10, 10, 10]
    assert_all_acked(result, 30)


# -- fields -------------------------------------------------------------------


class FieldsTopology(Topology):
    words = Words.spec(par=2)  # two emitters must agree on where a word goes
    rec = Record.spec(inputs={words: Grouping.fields("word")}, par=3)


FRUIT = ["apple", "pear", "fig", "plum", "kiwi", "lime", "date", "peach", "grape", "melon", "lemon", "mango"]


def fields_run() -> dict[str, set[int]]:
    words = [w for i, w in enumerate(FRUIT) for _ in range(i % 4 + 2)]
    result = complete_topology(FieldsTopology, {"words": words_input(words)})
    per_task = received(result, "rec")
    assert total(per_task) == Counter(words)
    assert_all_acked(result, len(words))
    where: dict[str, set[int]] = defaultdict(set)
    for task, counts in per_task.items():
        for word in counts:
            where[word].add(task)
    return dict(where)


def test_fields_grouping_sends_every_occurrence_of_a_word_to_one_task() -> None:
    where = fields_run()
    assert set(where) == set(FRUIT)
    for word, tasks in where.items():
        assert len(tasks) == 1, f"{word!r} went to tasks {sorted(tasks)}"
    used = set().union(*where.values())
    assert used <= set(task_ids(FieldsTopology, "rec"))
    assert len(used) >= 2, "fields grouping put every word on one task"


def test_fields_grouping_is_the_same_in_every_run() -> None:
    assert fields_run() == fields_run()


class MultiFieldSpout(Spout):
    outputs = ["user", "item"]


class PairRecord(Bolt):
    outputs = ["task", "pair"]

    def process(self, tup: Any) -> None:
        self.emit([self.context.task_id, f"{tup['user']}/{tup['item']}"])


class MultiFieldTopology(Topology):
    events = MultiFieldSpout.spec(par=2)
    rec = PairRecord.spec(inputs={events: Grouping.fields("item", "user")}, par=4)


def test_fields_grouping_on_several_fields_keys_on_all_of_them() -> None:
    events = [[user, item] for user in ["ann", "bob", "cy"] for item in ["x", "y", "z"]] * 3
    result = complete_topology(MultiFieldTopology, {"events": events})
    per_task = received(result, "rec")
    assert total(per_task) == Counter(f"{u}/{i}" for u, i in events)
    where: dict[str, set[int]] = defaultdict(set)
    for task, counts in per_task.items():
        for pair in counts:
            where[pair].add(task)
    assert all(len(tasks) == 1 for tasks in where.values()), where
    assert len(set().union(*where.values())) >= 2


_HASH_SCRIPT = """
import json
from squall.worker.executors import routing
choose = routing.fields([11, 12, 13, 14, 15], [0])
words = ["hello", "world", "storm", "squall", "tuple", "bolt", "spout"]
print(json.dumps({
    "hello": routing.stable_hash("hello"),
    "pair": routing.stable_hash(["hello", 3]),
    "placement": {w: list(choose((w,), None)) for w in words},
    "builtin": hash("hello"),
}))
"""


def _hash_in_subprocess(seed: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    proc = subprocess.run([sys.executable, "-c", _HASH_SCRIPT], env=env, capture_output=True,
                          text=True, timeout=30, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_fields_hash_is_stable_across_processes() -> None:
    one = _hash_in_subprocess("1")
    two = _hash_in_subprocess("2")
    # The seeds really do change Python's own str hash...
    assert one["builtin"] != two["builtin"]
    # ...but not Squall's, so every worker process routes a word alike.
    assert one["hello"] == two["hello"]
    assert one["pair"] == two["pair"]
    assert one["placement"] == two["placement"]
    from squall.worker.executors.routing import stable_hash

    assert stable_hash("hello") == one["hello"]


# -- all / global -------------------------------------------------------------


class AllTopology(Topology):
    words = Words.spec(par=2)
    rec = Record.spec(inputs={words: Grouping.all()}, par=3)


def test_all_grouping_delivers_every_tuple_to_every_task() -> None:
    words = ["a", "b", "b", "c", "d", "d", "d"]
    result = complete_topology(AllTopology, {"words": words_input(words)})

    per_task = received(result, "rec")
    assert set(per_task) == set(task_ids(AllTopology, "rec"))
    for task, counts in per_task.items():
        assert counts == Counter(words), f"task {task} got {counts}"
    assert len(result["rec"]) == 3 * len(words)
    assert_all_acked(result, len(words))


class GlobalTopology(Topology):
    words = Words.spec(par=2)
    rec = Record.spec(inputs={words: Grouping.global_()}, par=3)


def test_global_grouping_delivers_everything_to_the_lowest_task() -> None:
    words = [f"w{i}" for i in range(12)]
    result = complete_topology(GlobalTopology, {"words": words_input(words)})

    per_task = received(result, "rec")
    tasks = task_ids(GlobalTopology, "rec")
    assert len(tasks) == 3
    assert list(per_task) == [min(tasks)]
    assert per_task[min(tasks)] == Counter(words)
    assert_all_acked(result, len(words))


# -- direct -------------------------------------------------------------------


class DirectTopology(Topology):
    words = Words.spec()
    router = DirectRouter.spec(inputs=[words], par=2)
    consumer = Record.spec(inputs={router["d"]: Grouping.direct()}, par=3)


def test_direct_grouping_delivers_only_to_the_chosen_task() -> None:
    words = [f"w{i}" for i in range(9)]
    result = complete_topology(DirectTopology, {"words": words_input(words)})

    consumers = task_ids(DirectTopology, "consumer")
    assert len(consumers) == 3
    got = sorted((word, task) for task, word in result["consumer"])
    assert got == sorted((f"w{i}", consumers[i % 3]) for i in range(9))
    # emit() on a direct stream returns the one task it sent to.
    sent = {word: targets for word, targets in result.tuples("router", "sent")}
    assert sent == {f"w{i}": [consumers[i % 3]] for i in range(9)}
    assert_all_acked(result, len(words))


class ForgetfulTopology(Topology):
    words = Words.spec()
    router = ForgetfulRouter.spec(inputs=[words])
    consumer = Record.spec(inputs={router["d"]: Grouping.direct()}, par=2)


def test_emit_on_direct_stream_without_direct_task_fails_the_tuple() -> None:
    words = ["a", "b", "c"]
    result = complete_topology(ForgetfulTopology, {"words": words_input(words)}, fail_fast=False)

    assert sorted(result.failed) == [("words", 0), ("words", 1), ("words", 2)]
    assert result.acked == []
    assert result.errors, "the bad emit was not reported"
    assert all(e.component == "router" for e in result.errors)
    assert "direct_task" in result.errors[0].error
    assert result["consumer"] == []
    assert result.tuples("router", "d") == []


def test_emit_on_direct_stream_without_direct_task_raises_with_fail_fast() -> None:
    with pytest.raises(ComponentError, match="router"):
        complete_topology(ForgetfulTopology, {"words": [["a"]]})


class MisdirectedTopology(Topology):
    words = Words.spec()
    router = MisdirectedRouter.spec(inputs=[words])
    consumer = Record.spec(inputs=[router], par=2)


def test_direct_task_on_a_non_direct_stream_fails_the_tuple() -> None:
    result = complete_topology(MisdirectedTopology, {"words": [["a"], ["b"]]}, fail_fast=False)

    assert sorted(result.failed) == [("words", 0), ("words", 1)]
    assert result.errors
    assert "not direct" in result.errors[0].error
    assert result["consumer"] == []


# -- local_or_shuffle ---------------------------------------------------------


class LocalOrShuffleTopology(Topology):
    words = Words.spec(par=2)
    rec = RecordWithSource.spec(inputs={words: Grouping.local_or_shuffle()}, par=2)


class LocalOrShuffleFallbackTopology(Topology):
    words = Words.spec(par=2)
    # One task: it lives on one of the two workers, so the spout task on the
    # other worker has no local target and must fall back to shuffle.
    rec = RecordWithSource.spec(inputs={words: Grouping.local_or_shuffle()}, par=1)


def worker_of(topology: type[Topology], conf: dict[str, Any]) -> dict[int, int]:
    """task id -> worker slot, as LocalCluster places them."""
    plan = plan_topology(topology.definition(), None, conf)
    return {t: slot for slot, execs in enumerate(spread(plan.executors, conf["topology.workers"]))
            for e in execs for t in e.tasks}


def test_local_or_shuffle_with_two_workers_delivers_exactly_once_and_stays_local() -> None:
    conf = {"topology.workers": 2}
    words = [f"w{i}" for i in range(20)]
    result = complete_topology(LocalOrShuffleTopology, {"words": words_input(words)}, conf=conf)

    assert Counter(word for _, word, _ in result["rec"]) == Counter(words)
    assert_all_acked(result, len(words))
    slot = worker_of(LocalOrShuffleTopology, conf)
    spouts = task_ids(LocalOrShuffleTopology, "words", conf)
    bolts = task_ids(LocalOrShuffleTopology, "rec", conf)
    # The test is only meaningful if each worker holds a spout and a bolt task.
    assert {slot[t] for t in spouts} == {slot[t] for t in bolts} == {0, 1}
    assert {source for _, _, source in result["rec"]} == set(spouts)
    for task, word, source in result["rec"]:
        assert slot[task] == slot[source], f"{word} went from task {source} to remote task {task}"


def test_local_or_shuffle_falls_back_to_remote_tasks() -> None:
    conf = {"topology.workers": 2}
    words = [f"w{i}" for i in range(20)]
    result = complete_topology(LocalOrShuffleFallbackTopology, {"words": words_input(words)}, conf=conf)

    assert Counter(word for _, word, _ in result["rec"]) == Counter(words)
    spouts = task_ids(LocalOrShuffleFallbackTopology, "words", conf)
    assert {source for _, _, source in result["rec"]} == set(spouts)
    assert_all_acked(result, len(words))


class ShuffleTwoWorkersTopology(Topology):
    words = Words.spec(par=2)
    rec = RecordWithSource.spec(inputs={words: Grouping.shuffle()}, par=2)


def test_shuffle_prefers_the_emitting_workers_tasks_like_storms_load_aware_shuffle() -> None:
    conf = {"topology.workers": 2}
    words = [f"w{i}" for i in range(40)]
    result = complete_topology(ShuffleTwoWorkersTopology, {"words": words_input(words)}, conf=conf)

    assert Counter(word for _, word, _ in result["rec"]) == Counter(words)
    assert_all_acked(result, len(words))
    slot = worker_of(ShuffleTwoWorkersTopology, conf)
    assert {slot[t] for t in task_ids(ShuffleTwoWorkersTopology, "rec", conf)} == {0, 1}
    for task, word, source in result["rec"]:
        assert slot[task] == slot[source], f"{word} crossed from task {source} to task {task}"

    # Storm's switch turns it off: the spread is even over both workers again.
    plain = complete_topology(ShuffleTwoWorkersTopology, {"words": words_input(words)},
                              conf={**conf, "topology.disable.loadaware.messaging": True})
    assert any(slot[task] != slot[source] for task, _, source in plain["rec"])


def test_load_aware_shuffle_widens_when_local_tasks_fill_and_narrows_when_they_drain() -> None:
    load = {1: 0.0}
    choose = routing.load_aware_shuffle([1, 2, 3], {1}, load.__getitem__, higher=0.8, lower=0.2)

    def picks(n: int) -> Counter[int]:
        return Counter(t for _ in range(n) for t in choose(None, None))

    assert picks(2000) == Counter({1: 2000})
    load[1] = 0.9  # over the higher bound: every task now
    assert set(picks(2000)) == {1, 2, 3}
    load[1] = 0.5  # between the bounds: stays wide (hysteresis)
    assert set(picks(2000)) == {1, 2, 3}
    load[1] = 0.1
    later = picks(2000)
    assert set(later) == {1, 2, 3}  # the first look at the load is up to 256 choices away
    assert picks(2000) == Counter({1: 2000})


# -- partial_key --------------------------------------------------------------


class PartialKeyTopology(Topology):
    words = Words.spec(par=2)
    rec = Record.spec(inputs={words: Grouping.partial_key("word")}, par=4)


def test_partial_key_spreads_a_hot_key_over_at_most_two_tasks() -> None:
    words = ["hot"] * 40
    result = complete_topology(PartialKeyTopology, {"words": words_input(words)})

    per_task = received(result, "rec")
    assert total(per_task) == Counter(words)
    assert 1 <= len(per_task) <= 2, f"hot key went to tasks {sorted(per_task)}"
    assert_all_acked(result, len(words))


def test_partial_key_splits_hot_keys_between_two_tasks() -> None:
    keys = ["k0", "k1", "k2", "k3", "k4", "k5"]
    words = keys * 20
    result = complete_topology(PartialKeyTopology, {"words": words_input(words)})

    per_task = received(result, "rec")
    assert total(per_task) == Counter(words)
    spread_of = {k: {t for t, counts in per_task.items() if counts[k]} for k in keys}
    assert all(1 <= len(tasks) <= 2 for tasks in spread_of.values()), spread_of
    # Load balancing is the point: a hot key is not pinned to a single task.
    assert any(len(tasks) == 2 for tasks in spread_of.values()), spread_of


# -- custom -------------------------------------------------------------------


class CustomTopology(Topology):
    words = Words.spec(par=2)
    last = Record.spec(inputs={words: Grouping.custom(LastTask)}, par=3)
    nth = Record.spec(inputs={words: Grouping.custom(NthTask, index=1)}, par=3)
    ends = Record.spec(inputs={words: Grouping.custom(BothEnds)}, par=3)


def test_custom_grouping_is_honoured() -> None:
    words = [f"w{i}" for i in range(10)]
    result = complete_topology(CustomTopology, {"words": words_input(words)})

    last = task_ids(CustomTopology, "last")
    nth = task_ids(CustomTopology, "nth")
    ends = task_ids(CustomTopology, "ends")
    assert received(result, "last") == {last[-1]: Counter(words)}
    assert received(result, "nth") == {nth[1]: Counter(words)}  # args reach the grouping
    assert received(result, "ends") == {ends[0]: Counter(words), ends[-1]: Counter(words)}
    assert_all_acked(result, len(words))


# -- emit() return value ------------------------------------------------------


class FanoutTopology(Topology):
    words = Words.spec()
    fanout = Fanout.spec(inputs=[words])
    everyone = Record.spec(inputs={fanout: Grouping.all()}, par=2)
    keyed = Record.spec(inputs={fanout: Grouping.fields("word")}, par=3)


def test_emit_returns_the_target_task_ids() -> None:
    words = ["a", "b", "c", "d", "e"]
    result = complete_topology(FanoutTopology, {"words": words_input(words)})

    arrived: dict[str, list[int]] = defaultdict(list)
    for component in ("everyone", "keyed"):
        for task, word in result[component]:
            arrived[word].append(task)
    returned = {word: (targets, kind) for word, targets, kind in result.tuples("fanout", "ret")}
    assert set(returned) == set(words)
    everyone = task_ids(FanoutTopology, "everyone")
    keyed = task_ids(FanoutTopology, "keyed")
    for word in words:
        targets, kind = returned[word]
        assert kind == "tuple"
        assert sorted(targets) == sorted(arrived[word])
        assert len(targets) == 3
        assert set(everyone) <= set(targets)
        assert len(set(targets) & set(keyed)) == 1
    assert_all_acked(result, len(words))


def test_custom_grouping_choosing_a_task_outside_its_targets_fails_the_tuple_clearly() -> None:
    class Wild(CustomGrouping):
        def choose_tasks(self, task_id: int, values: Any) -> list[int]:
            return [999]

    class Relay(Bolt):
        outputs = ["word"]

        def process(self, tup: Any) -> None:
            self.emit([tup.values[0]])

    class T(Topology):
        words = Words.spec()
        relay = Relay.spec(inputs=[words])
        sink = Record.spec(inputs={relay: Grouping.custom(Wild)})

    result = complete_topology(T, mock_sources={"words": [["a"]]}, fail_fast=False)
    assert result.failed and not result["sink"]
    assert "Wild chose tasks [999]" in result.errors[0].error


def test_fields_memo_gives_the_hash_answer_past_its_size() -> None:
    tasks = [4, 5, 6]
    choose = routing.fields(tasks, [0])
    keys = [f"k{i}" for i in range(routing.FIELDS_MEMO_SIZE + 100)] + ["k1", "k7"]
    for key in keys:
        assert choose([key], None) == (sorted(tasks)[routing.stable_hash(key) % 3],)
    assert choose([17], None) == (sorted(tasks)[routing.stable_hash(17) % 3],)


class Busy(Bolt):
    """Burns a core per tuple, as a heavy bolt does: its thread, not its queue, is the load."""

    outputs = ["task"]

    def process(self, tup: Any) -> None:
        deadline = time.perf_counter() + 0.002
        while time.perf_counter() < deadline:
            pass
        self.emit([self.context.task_id])


class Numbers(Spout):
    outputs = ["n"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.n = 0

    def next_tuple(self) -> None:
        self.n += 1
        self.emit([self.n], tup_id=self.n)


class TaskCounter(Bolt):
    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        TaskCounter.seen = Counter()

    def process(self, tup: Any) -> None:
        TaskCounter.seen[tup.values.task] += 1


class OneSpoutHeavyBolt(Topology):
    config = {"topology.workers": 2, "topology.max.spout.pending": 50}
    numbers = Numbers.spec()
    busy = Busy.spec(inputs=[numbers], par=2)
    counter = TaskCounter.spec(inputs=[busy])


@pytest.mark.timeout(60)
def test_shuffle_widens_to_the_other_workers_tasks_when_the_local_one_keeps_its_core_busy() -> None:
    # A single spout and a CPU-bound bolt of 2 tasks in 2 workers: the spout's local task
    # has a short queue (max spout pending 50) but uses its whole core, so the shuffle
    # must send tuples to the other worker's task too.
    from squall import LocalCluster

    with LocalCluster() as cluster:
        cluster.submit("heavy", OneSpoutHeavyBolt)
        poll_for(lambda: len(getattr(TaskCounter, "seen", {})) == 2, timeout=30,
                 message="both bolt tasks got tuples")
