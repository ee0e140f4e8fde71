"""The walk every durable map state must pass, whatever holds it (SQLite, Redis, ...):
counts committed, a batch that dies with its task after writing, its replay by a new
task's state, then later batches -- with each kind's answer for the replay."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from squall.trident.state import MapState, StateType


def add(n: int) -> Any:
    return lambda old: (old or 0) + n


# What "the", "cat" and "dog" hold once txid 2 has been replayed and committed.
AFTER_REPLAY = {
    StateType.NON_TRANSACTIONAL: [4, 1, None],  # counted twice: at least once
    StateType.TRANSACTIONAL: [3, 1, None],  # the same batch again: left as it was
    StateType.OPAQUE: [7, 1, 1],  # another batch under txid 2: recomputed from before txid 2
}


def crash_and_replay(state_type: StateType, make: Callable[[], MapState]) -> list[MapState]:
    """Run the walk with states from ``make`` (each a new task's); returns them to close."""
    states = [make()]
    first = states[0]
    first.begin_commit(1)
    assert first.multi_update([["the"], ["cat"]], [add(2), add(1)]) == [2, 1]
    assert first.multi_get([["cat"], ["the"]]) == [1, 2]  # the batch reads its own updates
    first.commit(1)

    # txid 2 writes, then its task dies before the batch completes
    first.begin_commit(2)
    assert first.multi_update([["the"]], [add(1)]) == [3]

    # a new task replays txid 2: the same batch, unless the spout is opaque
    states.append(make())
    replay = states[-1]
    replay.begin_commit(2)
    if state_type is StateType.OPAQUE:
        assert replay.multi_get([["the"]]) == [2]
        assert replay.multi_update([["the"], ["dog"]], [add(5), add(1)]) == [7, 1]
    else:
        assert replay.multi_update([["the"]], [add(1)]) == AFTER_REPLAY[state_type][:1]
    replay.commit(2)

    states.append(make())
    reader = states[-1]
    assert reader.multi_get([["the"], ["cat"], ["dog"]]) == AFTER_REPLAY[state_type]
    reader.begin_commit(3)
    assert reader.multi_update([["cat"]], [add(10)]) == [11]
    reader.commit(3)
    assert make_and_read(make, states, [["cat"]]) == [11]
    return states


def make_and_read(make: Callable[[], MapState], states: list[MapState], keys: list[Any]) -> list[Any]:
    state = make()
    states.append(state)
    return state.multi_get(keys)


def global_value(make: Callable[[], MapState]) -> list[MapState]:
    """A global aggregate's one value (Snapshottable), replayed once."""
    state = make()
    state.begin_commit(1)
    assert state.update(add(4)) == 4
    state.commit(1)
    state.begin_commit(2)
    state.set(state.get() + 1)
    state.commit(2)
    other = make()
    assert other.get() == 5
    return [state, other]
