"""MemoryMapState: one table per factory and partition, shared by every state made for it
in the process (Storm's static map), of any state type; get_tuples; Storm's
StateTest.testMemoryMapStateRemove sequence."""

from __future__ import annotations

import pickle
import threading
from typing import Any

from squall.trident.state import MemoryMapState, OpaqueValue, StateType, TransactionalValue


def add(n: int) -> Any:
    return lambda old: (old or 0) + n


def test_states_of_one_factory_and_partition_share_their_values() -> None:
    factory = MemoryMapState.factory()
    writer = factory.make_state({}, None, 0, 2)
    writer.begin_commit(1)
    writer.multi_update([["the"], ["cat"]], [add(2), add(1)])
    writer.commit(1)
    # another task's state for partition 0 (a state_query's) sees them; partition 1 and
    # another factory do not
    assert factory.make_state({}, None, 0, 2).multi_get([["the"], ["cat"]]) == [2, 1]
    assert factory.make_state({}, None, 1, 2).multi_get([["the"]]) == [None]
    assert MemoryMapState.factory().make_state({}, None, 0, 2).multi_get([["the"]]) == [None]
    # the factory travels to workers pickled: the copy names the same tables
    copy = pickle.loads(pickle.dumps(factory))
    assert copy.make_state({}, None, 0, 2).multi_get([["the"]]) == [2]


def test_memory_map_state_is_opaque_by_default_as_storms_factory() -> None:
    state = MemoryMapState.factory().make_state({}, None, 0, 1)
    state.begin_commit(1)
    state.multi_update([["a"]], [add(1)])
    state.commit(1)
    assert state.backing.values == {("a",): OpaqueValue(1, 1, None)}
    state.begin_commit(1)
    assert state.multi_update([["a"]], [add(3)]) == [3]  # the replay starts before txid 1


def test_memory_map_state_of_each_type() -> None:
    results = {}
    for state_type in StateType:
        state = MemoryMapState.factory(state_type).make_state({}, None, 0, 1)
        seen = []
        for txid in (1, 1, 2):
            state.begin_commit(txid)
            seen.append(state.multi_update([["a"]], [add(1)])[0])
            state.commit(txid)
        results[state_type] = seen
        if state_type is StateType.TRANSACTIONAL:
            assert state.backing.values == {("a",): TransactionalValue(2, 2)}
    assert results == {StateType.NON_TRANSACTIONAL: [1, 2, 3], StateType.TRANSACTIONAL: [1, 1, 2],
                       StateType.OPAQUE: [1, 1, 2]}


def test_get_tuples_gives_each_key_values_then_its_current_value() -> None:
    for state_type in StateType:
        state = MemoryMapState.factory(state_type).make_state({}, None, 0, 1)
        state.begin_commit(1)
        state.multi_update([["the", 1], ["cat", 2]], [add(3), add(1)])
        state.commit(1)
        state.begin_commit(2)
        state.multi_update([["the", 1]], [add(1)])
        state.commit(2)
        assert sorted(state.get_tuples()) == [["cat", 2, 1], ["the", 1, 4]]


def test_memory_map_state_is_snapshottable() -> None:
    state = MemoryMapState.factory().make_state({}, None, 0, 1)
    state.begin_commit(1)
    assert state.update(add(5)) == 5
    state.commit(1)
    state.begin_commit(2)
    state.set(state.get() * 2)
    state.commit(2)
    assert state.get() == 10
    assert state.get_tuples() == [["$MEMORY-MAP-STATE-GLOBAL$", 10]]


def test_storm_memory_map_state_remove_sequence() -> None:
    state = MemoryMapState("remove-test")
    state.begin_commit(1)
    state.multi_put([["a"]], [1])
    state.multi_put([["b"]], [2])
    state.commit(1)
    state.begin_commit(2)
    state.multi_remove([["a"]])
    assert state.multi_get([["a"]]) == [None]
    assert state.multi_get([["b"]]) == [2]
    assert state.get_tuples() == [["b", 2]]
    state.commit(2)
    # txid 2 again: the removal is undone with the rest of its first try
    state.begin_commit(2)
    assert state.multi_get([["a"]]) == [1]
    assert state.multi_get([["b"]]) == [2]
    state.multi_remove([["a"]])
    state.commit(2)
    # txid 3: txid 2 is done, the key is gone from the table
    state.begin_commit(3)
    assert state.multi_get([["a"]]) == [None]
    assert state.multi_get([["b"]]) == [2]
    assert ("a",) not in state.backing.values
    state.commit(3)
    MemoryMapState.clear_all()


def test_concurrent_readers_see_a_batch_whole() -> None:
    factory = MemoryMapState.factory(StateType.NON_TRANSACTIONAL)
    writer, reader = factory.make_state({}, None, 0, 1), factory.make_state({}, None, 0, 1)
    keys = [[f"k{i}"] for i in range(200)]
    torn = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            values = reader.multi_get(keys)
            if len(set(values)) != 1:
                torn.append(values)

    thread = threading.Thread(target=read)
    writer.multi_put(keys, [0] * len(keys))
    thread.start()
    for n in range(1, 200):
        writer.multi_put(keys, [n] * len(keys))
    done.set()
    thread.join()
    assert torn == []
