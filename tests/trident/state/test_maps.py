"""The three map states over a backing map: Storm's StateTest sequences with their values,
Trident-state.md's examples as written, a batch's reads seeing its updates, the stale
batches Squall refuses, SnapshottableMap, and CachedMap in front of a backing map."""

from __future__ import annotations

from typing import Any

import pytest

from squall.transactional.attempt import TransactionAttempt
from squall.trident.state import (
    CachedMap,
    CombinerValueUpdater,
    IBackingMap,
    MapState,
    MemoryBackingMap,
    NonTransactionalMap,
    OpaqueMap,
    OpaqueValue,
    ReducerValueUpdater,
    SnapshottableMap,
    StaleBatchError,
    State,
    StateFactory,
    TransactionalMap,
    TransactionalValue,
    ValueUpdater,
    build_map_state,
)


class Count:
    """Storm's Count as a combiner: what StateTest's CombinerValueUpdater combines with."""

    def combine(self, a: int, b: int) -> int:
        return a + b


def single_get(state: MapState, key: Any) -> Any:
    return state.multi_get([[key]])[0]


def single_update(state: MapState, key: Any, amount: int) -> Any:
    return state.multi_update([[key]], [CombinerValueUpdater(Count(), amount)])[0]


def add(n: int) -> Any:
    return lambda old: (old or 0) + n


# -- Storm's StateTest -----------------------------------------------------------------------

def test_opaque_map_state_test_sequence() -> None:
    state = OpaqueMap.build(MemoryBackingMap())
    state.begin_commit(1)
    assert single_get(state, "a") is None
    # a batch's reads see its own updates
    assert single_update(state, "a", 1) == 1
    assert single_get(state, "a") == 1
    assert single_update(state, "a", 2) == 3
    assert single_get(state, "a") == 3
    state.commit(1)
    # txid 1 again: from the value before txid 1, whatever its first try counted
    state.begin_commit(1)
    assert single_get(state, "a") is None
    assert single_update(state, "a", 2) == 2
    state.commit(1)
    state.begin_commit(2)
    assert single_get(state, "a") == 2
    assert single_update(state, "a", 3) == 5
    assert single_update(state, "a", 1) == 6
    state.commit(2)


def test_transactional_map_state_test_sequence() -> None:
    state = TransactionalMap.build(MemoryBackingMap())
    state.begin_commit(1)
    assert single_get(state, "a") is None
    assert single_update(state, "a", 1) == 1
    assert single_update(state, "a", 2) == 3
    state.commit(1)
    # txid 1 again: it already counted here, so the key stays as it is
    state.begin_commit(1)
    assert single_get(state, "a") == 3
    assert single_update(state, "a", 1) == 3
    assert single_update(state, "a", 2) == 3
    state.commit(1)
    state.begin_commit(2)
    assert single_get(state, "a") == 3
    assert single_update(state, "a", 3) == 6
    assert single_update(state, "a", 1) == 7
    state.commit(2)


def test_non_transactional_map_counts_a_replayed_txid_again() -> None:
    state = NonTransactionalMap.build(MemoryBackingMap())
    state.begin_commit(1)
    assert single_update(state, "a", 1) == 1
    assert single_get(state, "a") == 1
    state.commit(1)
    state.begin_commit(1)
    assert single_update(state, "a", 1) == 2  # at least once: the replay counts again
    state.commit(1)


# -- Trident-state.md ------------------------------------------------------------------------

def test_transactional_doc_example_man_man_dog_in_txid_3() -> None:
    # Given the database of the doc
    backing = MemoryBackingMap()
    backing.multi_put([("man",), ("dog",), ("apple",)],
                      [TransactionalValue(1, 3), TransactionalValue(3, 4), TransactionalValue(2, 10)])
    state = TransactionalMap.build(backing)
    # When txid 3, the batch ["man"] ["man"] ["dog"], is counted
    state.begin_commit(3)
    assert state.multi_update([["man"], ["man"], ["dog"]], [add(1), add(1), add(1)]) == [4, 5, 4]
    state.commit(3)
    # Then man moved on by 2 and dog, which txid 3 already counted, did not
    assert backing.values == {("man",): TransactionalValue(3, 5), ("dog",): TransactionalValue(3, 4),
                              ("apple",): TransactionalValue(2, 10)}


def test_opaque_doc_example_partial_count_2() -> None:
    stored = OpaqueValue(2, 4, 1)  # { value = 4, prevValue = 1, txid = 2 }
    for txid, expected in ((3, OpaqueValue(3, 6, 4)), (2, OpaqueValue(2, 3, 1))):
        backing = MemoryBackingMap()
        backing.multi_put([("count",)], [stored])
        state = OpaqueMap.build(backing)
        state.begin_commit(txid)
        state.multi_update([["count"]], [add(2)])
        state.commit(txid)
        assert backing.values[("count",)] == expected


def test_opaque_count_2_in_txid_3_then_a_different_replay_of_txid_3() -> None:
    backing = MemoryBackingMap()
    backing.multi_put([("count",)], [OpaqueValue(2, 4, 1)])
    state = OpaqueMap.build(backing)
    state.begin_commit(3)
    assert state.multi_update([["count"]], [add(2)]) == [6]
    # the batch fails before txid 3 is done; an opaque spout replays it with other tuples
    state.begin_commit(3)
    assert state.multi_get([["count"]]) == [4]
    assert state.multi_update([["count"]], [add(5)]) == [9]
    state.commit(3)
    assert backing.values[("count",)] == OpaqueValue(3, 9, 4)


# -- what else users rely on -----------------------------------------------------------------

@pytest.mark.parametrize("kind", [NonTransactionalMap, TransactionalMap, OpaqueMap])
def test_a_key_given_twice_in_one_call_sees_the_first_update(kind: Any) -> None:
    state = kind.build(MemoryBackingMap())
    state.begin_commit(1)
    assert state.multi_update([["a"], ["b"], ("a",)], [add(1), add(10), add(2)]) == [1, 10, 3]
    assert state.multi_get([["a"], ["b"], ["c"]]) == [3, 10, None]
    state.commit(1)


@pytest.mark.parametrize("kind", [NonTransactionalMap, TransactionalMap, OpaqueMap])
def test_multi_put_sets_values_read_back_in_the_batch_and_after(kind: Any) -> None:
    state = kind.build(MemoryBackingMap())
    state.begin_commit(1)
    state.multi_put([["a", 1], ["b", 2]], ["x", "y"])
    assert state.multi_get([["b", 2], ["a", 1]]) == ["y", "x"]
    state.commit(1)
    state.begin_commit(2)
    assert state.multi_get([["a", 1]]) == ["x"]
    state.commit(2)
    assert sorted(state.get_tuples()) == [["a", 1, "x"], ["b", 2, "y"]]


def test_an_opaque_map_keeps_the_coordinator_epoch_of_a_transaction_attempt() -> None:
    backing = MemoryBackingMap()
    state = OpaqueMap.build(backing)
    state.begin_commit(TransactionAttempt(4, 111, epoch=2))
    state.multi_update([["a"]], [add(1)])
    state.commit(TransactionAttempt(4, 111, epoch=2))
    assert backing.values[("a",)] == OpaqueValue(4, 1, None, epoch=2)
    # a superseded coordinator's try of txid 4 fails rather than overwrite it
    state.begin_commit(TransactionAttempt(4, 99, epoch=1))
    with pytest.raises(StaleBatchError, match="txid 4"):
        state.multi_update([["a"]], [add(5)])
    assert backing.values[("a",)] == OpaqueValue(4, 1, None, epoch=2)


@pytest.mark.parametrize("kind", [TransactionalMap, OpaqueMap])
def test_an_earlier_txid_than_the_stored_one_fails_the_batch(kind: Any) -> None:
    state = kind.build(MemoryBackingMap())
    state.begin_commit(5)
    state.multi_update([["a"]], [add(1)])
    state.commit(5)
    state.begin_commit(4)
    with pytest.raises(StaleBatchError, match=r"batch txid 4 is behind the state's .*5"):
        state.multi_update([["a"]], [add(1)])
    state.begin_commit(None)  # a DRPC stream's batch: no txid, reads and writes the current value
    assert state.multi_update([["a"]], [add(1)]) == [2]


@pytest.mark.parametrize("kind", [NonTransactionalMap, TransactionalMap, OpaqueMap])
def test_bad_calls_are_clear_errors(kind: Any) -> None:
    state = kind.build(MemoryBackingMap())
    state.begin_commit(1)
    with pytest.raises(TypeError, match=r"such as \['the'\]"):
        state.multi_get(["the"])
    with pytest.raises(TypeError, match="a list of keys"):
        state.multi_get("the")
    with pytest.raises(ValueError, match="one updater per key: got 2 keys and 1 updaters"):
        state.multi_update([["a"], ["b"]], [add(1)])
    with pytest.raises(ValueError, match="one value per key"):
        state.multi_put([["a"]], [])
    with pytest.raises(TypeError, match="callable from the old value"):
        state.multi_update([["a"]], [5])
    with pytest.raises(TypeError, match="hashable"):
        state.multi_get([[["a", "list"]]])


def test_a_backing_map_holding_values_of_another_kind_is_named() -> None:
    backing = MemoryBackingMap()
    backing.multi_put([("a",)], [OpaqueValue(1, 1)])
    state = TransactionalMap.build(backing)
    state.begin_commit(2)
    with pytest.raises(TypeError, match=r"key \('a',\): a TransactionalMap keeps TransactionalValues"):
        state.multi_get([["a"]])


def test_value_updaters_storm_style() -> None:
    class Reduce:
        def init(self) -> int:
            return 100

        def reduce(self, value: int, tup: Any) -> int:
            return value + tup[0]

    class Double(ValueUpdater):
        def update(self, stored: Any) -> Any:
            return (stored or 1) * 2

    state = OpaqueMap.build(MemoryBackingMap())
    state.begin_commit(1)
    assert state.multi_update([["r"], ["d"], ["d"]],
                              [ReducerValueUpdater(Reduce(), [[1], [2]]), Double(), Double()]) == [103, 2, 4]
    assert state.multi_update([["r"]], [ReducerValueUpdater(Reduce(), [[10]])]) == [113]


@pytest.mark.parametrize("kind", ["non-transactional", "transactional", "opaque"])
def test_snapshottable_map_keeps_one_value_under_its_global_key(kind: str) -> None:
    backing = MemoryBackingMap()
    state = build_map_state(kind, backing, global_key="$GLOBAL$")
    assert isinstance(state, SnapshottableMap)
    state.begin_commit(1)
    assert state.get() is None
    assert state.update(add(4)) == 4
    state.set(state.get() + 1)
    assert state.get() == 5
    state.commit(1)
    assert list(backing.values) == [("$GLOBAL$",)]
    assert state.get_tuples() == [["$GLOBAL$", 5]]


# -- CachedMap -------------------------------------------------------------------------------

class CountingMap(MemoryBackingMap):
    """A backing map that records each call's keys, and can fail its next multi_put."""

    def __init__(self) -> None:
        super().__init__()
        self.gets: list[list[Any]] = []
        self.puts: list[list[Any]] = []
        self.fail_next_put = False

    def multi_get(self, keys: list[Any]) -> list[Any]:
        self.gets.append(list(keys))
        return super().multi_get(keys)

    def multi_put(self, keys: list[Any], values: list[Any]) -> None:
        self.puts.append(list(keys))
        if self.fail_next_put:
            self.fail_next_put = False
            raise ConnectionError("the store went away")
        super().multi_put(keys, values)


def test_cached_map_reads_only_keys_it_does_not_hold_and_writes_through() -> None:
    backing = CountingMap()
    backing.multi_put([("old",)], [7])
    cached = CachedMap(backing, 2)
    assert cached.multi_get([("old",), ("new",), ("old",)]) == [7, None, 7]
    assert backing.gets == [[("old",), ("new",)]]
    assert cached.multi_get([("new",), ("old",)]) == [None, 7]
    assert len(backing.gets) == 1  # both cached, an absent key included
    cached.multi_put([("new",)], [1])
    assert backing.values[("new",)] == 1  # written through
    assert cached.multi_get([("new",)]) == [1]
    # a third key evicts the least recently used ("old")
    assert cached.multi_get([("x",)]) == [None]
    assert cached.multi_get([("old",)]) == [7]
    assert backing.gets[-1] == [("old",)]


@pytest.mark.parametrize("kind", [TransactionalMap, OpaqueMap])
def test_state_test_sequences_give_the_same_answers_through_a_cached_map(kind: Any) -> None:
    plain, behind_cache = MemoryBackingMap(), MemoryBackingMap()
    answers = []
    for state in (kind.build(plain), kind.build(CachedMap(behind_cache, 10))):
        seen = []
        for txid, amounts in ((1, [1, 2]), (1, [1, 2]), (1, [5]), (2, [3, 1]), (2, [4])):
            state.begin_commit(txid)
            seen.append(single_get(state, "a"))
            seen.extend(single_update(state, "a", amount) for amount in amounts)
            state.commit(txid)
        answers.append(seen)
    assert answers[0] == answers[1]
    assert plain.values == behind_cache.values


@pytest.mark.parametrize("kind", [TransactionalMap, OpaqueMap])
def test_a_failed_write_leaves_no_value_in_the_cache_that_the_store_lacks(kind: Any) -> None:
    # Given a batch that counted "a" once, committed
    backing = CountingMap()
    state = kind.build(CachedMap(backing, 10))
    state.begin_commit(1)
    assert single_update(state, "a", 1) == 1
    state.commit(1)
    # When txid 2's write fails (the batch fails)
    state.begin_commit(2)
    backing.fail_next_put = True
    with pytest.raises(ConnectionError):
        single_update(state, "a", 5)
    # Then its replay counts from what the store holds, and the store ends with it
    state.begin_commit(2)
    assert single_get(state, "a") == 1
    assert single_update(state, "a", 5) == 6
    state.commit(2)
    state.begin_commit(3)
    assert single_get(state, "a") == 6
    assert single_get(kind.build(backing), "a") == 6


def test_cached_map_refuses_a_size_below_one() -> None:
    with pytest.raises(ValueError, match="cache_size must be an int >= 1"):
        CachedMap(MemoryBackingMap(), 0)


@pytest.mark.parametrize("kind", [NonTransactionalMap, TransactionalMap, OpaqueMap])
def test_a_batch_reads_through_the_cache_and_a_query_past_it(kind: Any) -> None:
    # Given a writer and a query's state, each with its own cache over one store
    store = CountingMap()
    writer, query = kind.build(CachedMap(store, 10)), kind.build(CachedMap(store, 10))
    assert single_get(query, "a") is None
    # When the writer's batches read "a" several times, only their first read reaches the store
    for txid in (1, 2):
        writer.begin_commit(txid)
        single_get(writer, "a")
        single_update(writer, "a", 1)
        single_get(writer, "a")
        writer.commit(txid)
    assert store.gets[1:] == [[("a",)]]
    # Then the query, outside any batch, sees what the writer wrote, not what it cached
    assert single_get(query, "a") == 2
    writer.begin_commit(3)
    single_update(writer, "a", 1)
    writer.commit(3)
    assert single_get(query, "a") == 3


def test_users_subclass_the_base_classes_with_a_plain_super_init() -> None:
    class DictBacking(IBackingMap):
        def __init__(self) -> None:
            super().__init__()
            self.data: dict[Any, Any] = {}

        def multi_get(self, keys: list[Any]) -> list[Any]:
            return [self.data.get(key) for key in keys]

        def multi_put(self, keys: list[Any], values: list[Any]) -> None:
            self.data.update(zip(keys, values, strict=True))

    class LocationDB(State):
        def __init__(self) -> None:
            super().__init__()
            self.locations: dict[int, str] = {}

    class LocationDBFactory(StateFactory):
        def __init__(self) -> None:
            super().__init__()

        def make_state(self, conf: dict[str, Any], context: Any, partition_index: int,
                       num_partitions: int) -> State:
            return LocationDB()

    state = LocationDBFactory().make_state({}, None, 0, 1)
    state.begin_commit(1)
    state.commit(1)
    state.close()
    backing = DictBacking()
    counts = OpaqueMap.build(backing)
    counts.begin_commit(1)
    assert counts.multi_update([["a"]], [add(1)]) == [1]
    counts.commit(1)
    assert backing.data == {("a",): OpaqueValue(1, 1, None)}
    with pytest.raises(NotImplementedError, match="DictBacking cannot list its entries"):
        counts.get_tuples()
