"""KeyValueState through prepare / commit / reset, over the real stores."""

from __future__ import annotations

from pathlib import Path

import pytest

from squall.errors import SerializationError
from squall.state import KeyValueState, MemoryStore, SQLiteStore

pytestmark = pytest.mark.timeout(20)


@pytest.fixture(params=["memory", "sqlite"])
def store(request, tmp_path: Path):
    s = MemoryStore("t") if request.param == "memory" else SQLiteStore(tmp_path / "s.sqlite", "t")
    yield s
    s.close()


def test_only_committed_state_survives_a_reload(store):
    state = KeyValueState(store, "count/3")
    assert state.load() == 0 and list(state.keys()) == []
    state.put("a", 1)
    state.put("b", 2)
    state.prepare(1)
    state.commit(1)
    state.put("a", 10)
    state.delete("b")
    state.prepare(2)  # prepared, never committed (the worker died)
    again = KeyValueState(store, "count/3")
    assert again.load() == 1
    assert {k: again.get(k) for k in list(again.keys())} == {"a": 1, "b": 2}
    # a reset reloads in place: a bolt holding the object sees the rolled-back values
    assert state.load() == 1 and state.get("a") == 1 and state.get("b") == 2


def test_a_commit_is_idempotent_and_works_in_a_fresh_process(store):
    state = KeyValueState(store, "count/1")
    state.put("w", 5)
    state.prepare(4)
    fresh = KeyValueState(store, "count/1")  # a restarted worker gets the commit
    fresh.commit(4)
    fresh.commit(4)  # the commit retried after a failure
    assert fresh.load() == 4 and fresh.get("w") == 5


def test_a_commit_of_another_txid_than_prepared_is_refused(store):
    state = KeyValueState(store, "count/1")
    state.prepare(2)
    with pytest.raises(ValueError, match="commit 3, but the prepared state is of txid 2"):
        state.commit(3)


def test_bad_keys_and_values_are_named(store):
    state = KeyValueState(store, "count/1")
    with pytest.raises(TypeError, match="state keys must be str"):
        state.put(3, "x")
    state.put("ok", 1)
    state.put("bad", {1, 2})
    with pytest.raises(SerializationError, match="'bad'"):
        state.prepare(1)


def test_tasks_do_not_share_state(store):
    one, two = KeyValueState(store, "c/1"), KeyValueState(store, "c/2")
    one.put("x", 1)
    one.prepare(1)
    one.commit(1)
    assert two.load() == 0 and two.get("x") is None
