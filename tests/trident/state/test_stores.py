"""Map states in Squall's stores: SqliteMapState in a real file, of each kind, through a task
that dies mid-batch and the replay by its successor, with and without the key cache; the
file's contents in squall.state's JSON forms; StoreMapState on the topology's provider."""

from __future__ import annotations

import json
import pickle
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from squall.errors import ConfigError
from squall.state.sqlite import SQLiteStore
from squall.trident.state import (
    MapState,
    OpaqueMap,
    SqliteMapState,
    StateType,
    StoreBackingMap,
    StoreMapState,
)
from tests.trident.state import scenarios


@pytest.fixture
def opened() -> Iterator[list[MapState]]:
    states: list[MapState] = []
    yield states
    for state in states:
        state.close()


def make_with(factory: Any, states: list[MapState], conf: dict[str, Any] | None = None,
              context: Any = None) -> Any:
    def make() -> MapState:
        state = factory.make_state(conf or {}, context, 0, 1)
        states.append(state)
        return state

    return make


@pytest.mark.parametrize("cache_size", [0, 1000])
@pytest.mark.parametrize("state_type", list(StateType))
def test_sqlite_map_state_through_a_task_that_dies_mid_batch(tmp_path: Path, opened: list[MapState],
                                                             state_type: StateType, cache_size: int) -> None:
    path = tmp_path / "state" / "counts.db"
    factory = SqliteMapState(state_type, path, namespace="words", cache_size=cache_size)
    opened.extend(scenarios.crash_and_replay(state_type, make_with(factory, opened)))
    opened.extend(scenarios.global_value(make_with(SqliteMapState(state_type, path, namespace="total"),
                                                   opened)))


def test_the_file_holds_json_keys_and_squall_state_values(tmp_path: Path, opened: list[MapState]) -> None:
    path = tmp_path / "counts.db"
    make = make_with(SqliteMapState.opaque(path, namespace="words"), opened)
    opened.extend(scenarios.crash_and_replay(StateType.OPAQUE, make))
    with closing(sqlite3.connect(path)) as conn:
        rows = dict(conn.execute("SELECT key, value FROM squall_state WHERE namespace = 'words'").fetchall())
    assert {key: json.loads(value) for key, value in rows.items()} == {
        '["the"]': {"curr": 7, "prev": 2, "txid": 2},
        '["cat"]': {"curr": 11, "prev": 1, "txid": 3},
        '["dog"]': {"curr": 1, "prev": None, "txid": 2},
    }


def test_factories_of_each_kind_and_their_names(tmp_path: Path, opened: list[MapState]) -> None:
    path = tmp_path / "x.db"
    made = [(SqliteMapState.opaque(path), StateType.OPAQUE),
            (SqliteMapState.transactional(path, namespace="t"), StateType.TRANSACTIONAL),
            (SqliteMapState.non_transactional(str(path), cache_size=0), StateType.NON_TRANSACTIONAL)]
    for factory, kind in made:
        assert factory.state_type is kind
        state = factory.make_state({}, None, 0, 1)
        opened.append(state)
        assert repr(factory).startswith(f"SqliteMapState({kind.name}, {str(path)!r}")
    assert isinstance(opened[0].delegate, OpaqueMap)


def test_compound_keys_and_any_json_values(tmp_path: Path, opened: list[MapState]) -> None:
    make = make_with(SqliteMapState.transactional(tmp_path / "x.db", cache_size=0), opened)
    state = make()
    state.begin_commit(1)
    state.multi_put([["a", 1], ["a", "1"], [None, 2.5]], [{"n": [1, 2]}, "text", None])
    state.commit(1)
    found = make().multi_get([["a", 1], ["a", "1"], [None, 2.5], ["b", 1]])
    assert found == [{"n": [1, 2]}, "text", None, None]


def test_two_namespaces_in_one_file_share_nothing(tmp_path: Path, opened: list[MapState]) -> None:
    path = tmp_path / "x.db"
    one = make_with(SqliteMapState.opaque(path, namespace="one"), opened)()
    two = make_with(SqliteMapState.opaque(path, namespace="two"), opened)()
    one.begin_commit(1)
    one.multi_put([["k"]], [1])
    one.commit(1)
    assert two.multi_get([["k"]]) == [None]


def test_without_a_path_the_file_is_the_topologys_state_file(tmp_path: Path, opened: list[MapState]) -> None:
    conf = {"squall.state.dir": str(tmp_path / "states")}
    context = SimpleNamespace(topology_name="wordcount")
    state = SqliteMapState.opaque().make_state(conf, context, 0, 1)
    opened.append(state)
    state.begin_commit(1)
    state.multi_put([["k"]], [1])
    state.commit(1)
    assert (tmp_path / "states" / "wordcount.sqlite").exists()
    with pytest.raises(ConfigError, match=r"outside a topology needs a file: give the SQLite path"):
        SqliteMapState.opaque().make_state({}, None, 0, 1)


def test_store_map_state_uses_the_topologys_state_provider(tmp_path: Path, opened: list[MapState]) -> None:
    path = tmp_path / "provider.db"
    conf = {"topology.state.provider": "sqlite",
            "topology.state.provider.config": json.dumps({"path": str(path)})}
    make = make_with(StoreMapState.transactional(namespace="counts"), opened, conf,
                     SimpleNamespace(topology_name="t"))
    opened.extend(scenarios.crash_and_replay(StateType.TRANSACTIONAL, make))
    with SQLiteStore(path, namespace="counts") as store:
        assert store.get_many(['["the"]']) == [{"value": 3, "txid": 2}]
    # a provider named on the factory wins over the topology's
    memory = StoreMapState.opaque(provider="memory").make_state(conf, None, 0, 1)
    opened.append(memory)
    assert memory.multi_get([["the"]]) == [None]
    with pytest.raises(ConfigError, match=r"topology\.state\.provider must be one of"):
        StoreMapState.opaque(provider="nope").make_state({}, None, 0, 1)


def test_factories_travel_pickled_and_open_nothing_until_make_state(tmp_path: Path) -> None:
    path = tmp_path / "not-yet.db"
    for factory in (SqliteMapState.transactional(path, namespace="n", cache_size=5),
                    StoreMapState.opaque(provider="redis", config={"url": "redis://127.0.0.1:1/0"})):
        copy = pickle.loads(pickle.dumps(factory))
        assert vars(copy) == vars(factory)
    assert not path.exists()


def test_bad_factory_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="namespace must be a non-empty str"):
        SqliteMapState.opaque("x.db", namespace="")
    with pytest.raises(ValueError, match="cache_size must be an int >= 0"):
        SqliteMapState.opaque("x.db", cache_size=-1)
    with pytest.raises(ValueError, match="one of"):
        StoreMapState("sometimes")


def test_a_key_written_by_another_kind_of_state_is_a_clear_error(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "x.db", namespace="n") as store:
        store.update(['["k"]'], lambda current: {'["k"]': 41})
        backing = StoreBackingMap(store, StateType.OPAQUE)
        with pytest.raises(ValueError, match=r"found 41 under key \['k'\].*same store and namespace"):
            backing.multi_get([("k",)])
        with pytest.raises(NotImplementedError, match="cannot list its entries"):
            OpaqueMap.build(backing).get_tuples()


def test_a_query_state_sees_what_the_writer_state_of_its_factory_wrote(tmp_path: Path,
                                                                       opened: list[MapState]) -> None:
    make = make_with(SqliteMapState.opaque(tmp_path / "x.db"), opened)
    writer, query = make(), make()
    for txid in (1, 2):
        writer.begin_commit(txid)
        writer.multi_update([["the"]], [scenarios.add(1)])
        writer.commit(txid)
        assert query.multi_get([["the"]]) == [txid]
