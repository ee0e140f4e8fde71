"""The stores under committer state: both keep the Store contract (atomic,
thread-safe, JSON in and out, clear errors), and SQLite's holds across
reopening and across processes sharing the file."""

from __future__ import annotations

import sqlite3
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from squall.errors import SerializationError
from squall.state import MemoryStore, SQLiteStore, Store
from squall.state.store import StoreError
from tests.helpers import run_together


def _increment(current: dict[str, Any]) -> dict[str, Any]:
    return {"n": (current["n"] or 0) + 1}


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s: Store = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "state.db")
    yield s
    s.close()


def test_get_many_returns_values_in_key_order_and_none_for_absent_keys(store: Store) -> None:
    assert store.get_many(["a", "b"]) == [None, None]
    store.update(["a", "b"], lambda cur: {"a": 1, "b": {"x": [1, 2.5, "s", None, True]}})
    assert store.get_many(["b", "zz", "a", "a"]) == [{"x": [1, 2.5, "s", None, True]}, None, 1, 1]
    assert store.get_many([]) == []


def test_update_passes_current_values_and_returns_what_fn_returned(store: Store) -> None:
    seen = []

    def fn(current: dict[str, Any]) -> dict[str, Any]:
        seen.append(dict(current))
        return {"a": (current["a"] or 0) + 10}

    assert store.update(["a", "b"], fn) == {"a": 10}
    assert store.update(["a", "b"], fn) == {"a": 20}
    assert seen == [{"a": None, "b": None}, {"a": 10, "b": None}]
    assert store.get_many(["a", "b"]) == [20, None]


def test_values_come_back_json_round_tripped(store: Store) -> None:
    store.update(["t"], lambda cur: {"t": (1, (2, 3))})
    assert store.get_many(["t"]) == [[1, [2, 3]]]


def test_a_raising_fn_writes_nothing(store: Store) -> None:
    store.update(["a", "b"], lambda cur: {"a": 1, "b": 2})

    def boom(current: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        store.update(["a", "b"], boom)
    assert store.get_many(["a", "b"]) == [1, 2]


def test_a_bad_value_for_one_key_writes_none_of_them(store: Store) -> None:
    store.update(["a", "b"], lambda cur: {"a": 1, "b": 2})
    with pytest.raises(SerializationError, match="'b'"):
        store.update(["a", "b"], lambda cur: {"a": 100, "b": object()})
    assert store.get_many(["a", "b"]) == [1, 2]
    # The store is still usable after a failed update (no transaction left open).
    store.update(["a"], lambda cur: {"a": 3})
    assert store.get_many(["a"]) == [3]


@pytest.mark.parametrize("value", [{1, 2}, object(), float("nan"), {"k": b"bytes"}])
def test_a_value_that_is_not_json_is_refused_naming_the_key(store: Store, value: Any) -> None:
    with pytest.raises(SerializationError, match="'my-key'"):
        store.update(["my-key"], lambda cur: {"my-key": value})
    assert store.get_many(["my-key"]) == [None]


@pytest.mark.parametrize("keys", [[1], ["a", None], [b"a"], "abc"])
def test_keys_that_are_not_str_are_a_type_error(store: Store, keys: Any) -> None:
    with pytest.raises(TypeError, match="str"):
        store.get_many(keys)
    with pytest.raises(TypeError, match="str"):
        store.update(keys, lambda cur: {})


def test_fn_writing_a_key_it_did_not_read_is_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="'other'"):
        store.update(["a"], lambda cur: {"a": 1, "other": 2})
    assert store.get_many(["a", "other"]) == [None, None]


def test_a_closed_store_refuses_use(store: Store) -> None:
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        store.get_many(["a"])


def test_threads_never_interleave_between_read_and_write(store: Store) -> None:
    start = threading.Barrier(4)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            start.wait()
            for _ in range(200):
                store.update(["n"], _increment)
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert store.get_many(["n"]) == [800]


def test_two_memory_stores_are_independent() -> None:
    a, b = MemoryStore(), MemoryStore()
    a.update(["k"], lambda cur: {"k": 1})
    assert b.get_many(["k"]) == [None]


# -- SQLite only -----------------------------------------------------------------------------------------


def test_values_survive_closing_and_reopening(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "state.db"  # parent directories are created
    with SQLiteStore(path) as s:
        s.update(["a", "b"], lambda cur: {"a": 1, "b": {"c": [2]}})
    with SQLiteStore(str(path)) as s:
        assert s.get_many(["a", "b"]) == [1, {"c": [2]}]


def test_namespaces_on_one_file_are_isolated(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SQLiteStore(path, namespace="one") as one, SQLiteStore(path, namespace="two") as two:
        one.update(["k"], lambda cur: {"k": "one"})
        assert two.get_many(["k"]) == [None]
        two.update(["k"], lambda cur: {"k": "two"})
        assert one.get_many(["k"]) == ["one"]
    with SQLiteStore(path, namespace="two") as two:
        assert two.get_many(["k"]) == ["two"]


def test_the_file_is_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    SQLiteStore(path).close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


def test_many_keys_are_read_beyond_sqlites_parameter_limit(tmp_path: Path) -> None:
    keys = [f"k{i}" for i in range(1500)]
    with SQLiteStore(tmp_path / "state.db") as s:
        s.update(keys, lambda cur: {k: i for i, k in enumerate(keys)})
        assert s.get_many(keys) == list(range(1500))


def _bad_path(tmp: Path, kind: str) -> Path:
    if kind == "a directory":
        return tmp
    if kind == "under a file":
        (tmp / "file").write_text("x")
        return tmp / "file" / "state.db"
    (tmp / "junk.db").write_bytes(b"not a database" * 100)
    return tmp / "junk.db"


@pytest.mark.parametrize("kind", ["a directory", "under a file", "not a database"])
def test_a_path_that_cannot_be_opened_is_a_store_error_naming_it(tmp_path: Path, kind: str) -> None:
    path = _bad_path(tmp_path, kind)
    with pytest.raises(StoreError, match=r"cannot (open|create)") as info:
        SQLiteStore(path)
    assert str(path) in str(info.value)


_CHILD = """
import sys
from squall.state import SQLiteStore

store = SQLiteStore(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()  # start together, so the two processes contend for the file
for _ in range(200):
    store.update(["n"], lambda cur: {"n": (cur["n"] or 0) + 1})
store.close()
"""


def test_two_processes_never_interleave_between_read_and_write(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    run_together([[sys.executable, "-c", _CHILD, str(path)] for _ in range(2)])
    with SQLiteStore(path) as s:
        assert s.get_many(["n"]) == [400]
