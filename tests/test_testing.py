"""squall.testing.complete_topology used the way a user tests a topology:
mock the spouts, run to completion, look at what each component emitted."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from squall import Bolt, Grouping, Spout, SquallError, Stream, Topology
from squall.errors import ComponentError
from squall.testing import complete_topology

# -- a word count, as a user would write it -------------------------------------


class Sentences(Spout):
    """A real source would read a queue; every test mocks it."""

    outputs = ["sentence"]

    def next_tuple(self) -> None:
        self.emit(["this spout must be mocked"])


class Split(Bolt):
    outputs = ["word"]

    def process(self, tup: Any) -> None:
        for word in tup.values.sentence.split():
            if word == "bug":
                raise ValueError(f"cannot split {tup.values.sentence!r}")
            self.emit([word])


class Count(Bolt):
    outputs = ["word", "count"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.counts: Counter[str] = Counter()

    def process(self, tup: Any) -> None:
        word = tup["word"]
        self.counts[word] += 1
        self.emit([word, self.counts[word]])


class WordCount(Topology):
    sentences = Sentences.spec()
    split = Split.spec(inputs=[sentences], par=2)
    count = Count.spec(inputs={split: Grouping.fields("word")}, par=2)


SENTENCES = [["the cat sat"], ["the dog"], ["a cat"]]


def test_word_count_returns_what_each_component_emitted() -> None:
    # When the word count runs over three mock sentences
    result = complete_topology(WordCount, mock_sources={"sentences": SENTENCES})

    # Then the spout emitted exactly the mock tuples, in order
    assert result["sentences"] == SENTENCES
    # And split emitted every word once, count a running count per word
    assert sorted(result["split"]) == sorted([w] for s in SENTENCES for w in s[0].split())
    assert sorted(result["count"]) == [
        ["a", 1], ["cat", 1], ["cat", 2], ["dog", 1], ["sat", 1], ["the", 1], ["the", 2],
    ]
    # And every mock tuple was fully processed
    assert sorted(result.acked) == [("sentences", k) for k in range(len(SENTENCES))]
    assert result.failed == []
    assert result.errors == []


class Source(Bolt):
    """Emits [the task that emitted the input, its value]."""

    outputs = ["task", "n"]

    def process(self, tup: Any) -> None:
        self.emit([tup.task, tup.values.n])


class Numbers(Spout):
    outputs = ["n"]


def test_mock_spout_tasks_share_out_the_mock_tuples() -> None:
    # Given a spout with 3 tasks and 30 mock tuples
    class T(Topology):
        numbers = Numbers.spec(par=3)
        source = Source.spec(inputs=[numbers])

    mocks = [[n] for n in range(30)]
    result = complete_topology(T, mock_sources={"numbers": mocks})

    # Then each tuple was emitted once, by one task, ten per task
    assert sorted(result["numbers"]) == mocks
    by_task = Counter(task for task, _ in result["source"])
    assert len(by_task) == 3 and set(by_task.values()) == {10}
    assert sorted(n for _, n in result["source"]) == list(range(30))
    assert len(result.acked) == 30
    assert sorted(result.acked) == [("numbers", k) for k in range(30)]


class OddEven(Spout):
    outputs = [Stream(["n"], name="odd"), Stream(["n"], name="even")]


class Echo(Bolt):
    outputs = ["n"]

    def process(self, tup: Any) -> None:
        self.emit([tup.values.n])


class OddOnly(Topology):
    numbers = OddEven.spec()
    echo = Echo.spec(inputs=[numbers["odd"]])


def test_mock_sources_for_named_streams() -> None:
    # When the mock tuples are given per stream
    result = complete_topology(OddOnly, mock_sources={"numbers": {"odd": [[1], [3]], "even": [[2]]}})

    # Then each is emitted on its own stream, and only the subscriber's stream reaches it
    assert result.tuples("numbers", "odd") == [[1], [3]]
    assert result.tuples("numbers", "even") == [[2]]
    assert result["numbers"] == []  # nothing on the default stream
    assert sorted(result["echo"]) == [[1], [3]]
    assert len(result.acked) == 3 and result.failed == []


def test_a_mock_stream_the_spout_does_not_declare_is_refused() -> None:
    with pytest.raises(SquallError, match="'default'"):
        complete_topology(OddOnly, mock_sources={"numbers": [[1]]})


def test_a_bolt_bug_is_raised_in_the_test_with_its_cause() -> None:
    # When a bolt raises on one of the mock tuples, with fail_fast (the default)
    with pytest.raises(ComponentError) as info:
        complete_topology(WordCount, mock_sources={"sentences": [["a b"], ["a bug here"]]})

    # Then the test sees the bolt's own exception, chained
    assert isinstance(info.value, SquallError)
    assert "'split'" in str(info.value)
    cause = info.value.__cause__
    assert isinstance(cause, ValueError)
    assert str(cause) == "cannot split 'a bug here'"


def test_a_bolt_bug_is_reported_in_the_result_without_fail_fast() -> None:
    # When the same bug happens with fail_fast=False
    result = complete_topology(WordCount, mock_sources={"sentences": [["a b"], ["a bug here"], ["c"]]},
                               fail_fast=False)

    # Then the run completes: the bad sentence failed, the others were acked
    assert sorted(result.failed) == [("sentences", 1)]
    assert sorted(result.acked) == [("sentences", 0), ("sentences", 2)]
    # And the error is in the result, naming the component and the problem
    assert [(e.component, e.fatal) for e in result.errors] == [("split", False)]
    assert "cannot split 'a bug here'" in result.errors[0].error
    # And the words split before the bug still count
    assert sorted(result["count"]) == [["a", 1], ["a", 2], ["b", 1], ["c", 1]]


@pytest.mark.parametrize("name", ["split", "nope"])
def test_mocking_something_that_is_not_a_spout_is_refused(name: str) -> None:
    with pytest.raises(SquallError, match=f"'{name}'"):
        complete_topology(WordCount, mock_sources={name: [["x"]]})


def test_waiting_for_progress_fails_on_a_stall_not_on_slowness() -> None:
    from squall.testing import wait_for_progress

    ticks = iter(range(1000))
    # slow but moving: one step a poll, far past what a fixed 0.05 s budget would allow
    assert wait_for_progress(lambda: next(ticks), 40, stall=0.5, interval=0.005) == 40
    with pytest.raises(AssertionError, match=r"no progress for 0\.1s waiting for the stuck one: stuck at 3"):
        wait_for_progress(lambda: 3, 10, stall=0.1, message="the stuck one", interval=0.01)
