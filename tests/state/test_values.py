"""The transactional and opaque update rules, on their own and through the
maps on both stores: replays (same batch or, for opaque, a different one) and
stale commits never change the exact total."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from squall.errors import SerializationError
from squall.state import (
    MemoryStore,
    OpaqueMap,
    OpaqueValue,
    SQLiteStore,
    Store,
    TransactionalMap,
    TransactionalValue,
)
from squall.state.values import apply_opaque, apply_transactional, check_txid
from squall.transactional.attempt import TransactionAttempt


def plus(n: int) -> Callable[[Any], Any]:
    return lambda old: (old or 0) + n


@dataclass
class Attempt:
    """Stands in for a TransactionAttempt: anything with a ``txid``."""

    txid: int
    attempt_id: int = 7


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s: Store = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "state.db")
    yield s
    s.close()


# -- the rules, without a store ----------------------------------------------------------------------------


def test_transactional_applies_when_nothing_is_stored_and_on_a_higher_txid() -> None:
    assert apply_transactional(None, 1, plus(5)) == {"value": 5, "txid": 1}
    assert apply_transactional({"value": 5, "txid": 1}, 3, plus(2)) == {"value": 7, "txid": 3}


def test_transactional_skips_the_same_txid_and_a_lower_one() -> None:
    stored = {"value": 5, "txid": 4}
    assert apply_transactional(stored, 4, plus(100)) is None  # a replay: already counted
    assert apply_transactional(stored, 3, plus(100)) is None  # stale: a zombie's commit


def test_opaque_first_commit_has_no_prev() -> None:
    assert apply_opaque(None, 1, plus(3)) == {"curr": 3, "prev": None, "txid": 1}


def test_opaque_replay_with_a_different_partial_recomputes_from_prev() -> None:
    # The seed's example: count 10 before txid 5; txid 5 first committed +3, then replayed as +4.
    first = apply_opaque({"curr": 10, "prev": 2, "txid": 4}, 5, plus(3))
    assert first == {"curr": 13, "prev": 10, "txid": 5}
    assert apply_opaque(first, 5, plus(4)) == {"curr": 14, "prev": 10, "txid": 5}


def test_opaque_higher_txid_rolls_prev_and_lower_is_skipped() -> None:
    stored = {"curr": 14, "prev": 10, "txid": 5}
    assert apply_opaque(stored, 6, plus(1)) == {"curr": 15, "prev": 14, "txid": 6}
    assert apply_opaque(stored, 4, plus(1)) is None


@pytest.mark.parametrize("txid", [0, -1, True, False, "3", 2.0, None, Attempt(0)])
def test_a_txid_must_be_an_int_of_at_least_one(txid: Any) -> None:
    with pytest.raises(ValueError, match="txid"):
        check_txid(txid)


def test_a_transaction_attempt_stands_for_its_txid() -> None:
    assert check_txid(Attempt(12)) == 12
    assert check_txid(12) == 12


# -- the maps, on both stores ------------------------------------------------------------------------------


@pytest.mark.parametrize("map_type", [TransactionalMap, OpaqueMap])
def test_replayed_commits_of_the_same_batches_count_exactly_once(store: Store, map_type: type) -> None:
    counts = map_type(store)
    batches = {1: {"a": 1, "b": 2}, 2: {"a": 10}, 3: {"b": 5, "c": 1}, 4: {"a": 100}}
    # Each txid commits, some twice (the committer died before the coordinator heard), then a stale one.
    for txid in [1, 1, 2, 3, 3, 3, 4, 4, 2]:
        counts.increment(txid, batches[txid])
    assert counts.get_many(["a", "b", "c", "d"]) == [111, 7, 1, None]
    assert counts.txid_of("a") == 4
    assert counts.txid_of("b") == 3
    assert counts.txid_of("d") is None


def test_opaque_replays_with_changed_batches_count_only_the_last_attempt(store: Store) -> None:
    counts = OpaqueMap(store)
    # txid 2 commits a batch, is replayed with a different one, then again with another: the last counts.
    commits = [(1, {"a": 1}), (2, {"a": 5, "b": 1}), (2, {"a": 3, "b": 2}), (2, {"a": 4, "b": 1}),
               (3, {"a": 10}), (3, {"a": 20}), (1, {"a": 1000})]
    for txid, deltas in commits:
        counts.increment(txid, deltas)
    assert counts.get_many(["a", "b"]) == [1 + 4 + 20, 1]


def test_update_returns_the_current_value_of_every_key_applied_or_skipped(store: Store) -> None:
    counts = TransactionalMap(store)
    assert counts.increment(1, {"a": 1}) == {"a": 1}
    assert counts.increment(2, {"b": 2}) == {"b": 2}
    # a's txid is 1, b's is 2: txid 2 applies to a and is a replay for b.
    assert counts.increment(2, {"a": 10, "b": 10}) == {"a": 11, "b": 2}
    assert counts.update(3, {}) == {}


def test_a_map_update_is_atomic_over_its_keys(store: Store) -> None:
    counts = OpaqueMap(store)
    counts.increment(1, {"a": 1, "b": 1})

    def boom(old: Any) -> Any:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        counts.update(2, {"a": plus(5), "b": boom})
    with pytest.raises(SerializationError, match="'b'"):
        counts.update(2, {"a": plus(5), "b": lambda old: {1, 2}})
    assert counts.get_many(["a", "b"]) == [1, 1]
    assert counts.txid_of("a") == 1


def test_arbitrary_update_functions_see_the_unwrapped_value(store: Store) -> None:
    words = TransactionalMap(store)
    words.update(1, {"seen": lambda old: sorted({*(old or []), "cat"})})
    words.update(2, {"seen": lambda old: sorted({*(old or []), "ant"})})
    assert words.get("seen") == ["ant", "cat"]


def test_a_map_takes_a_transaction_attempt_for_its_txid(store: Store) -> None:
    counts = TransactionalMap(store)
    counts.increment(Attempt(3), {"a": 1})
    counts.increment(Attempt(3, attempt_id=8), {"a": 1})  # a new attempt of the same transaction
    assert counts.get("a") == 1
    assert counts.txid_of("a") == 3


@pytest.mark.parametrize("txid", [0, True, "3"])
def test_a_map_refuses_a_bad_txid_and_writes_nothing(store: Store, txid: Any) -> None:
    with pytest.raises(ValueError, match="txid"):
        TransactionalMap(store).increment(txid, {"a": 1})
    with pytest.raises(ValueError, match="txid"):
        OpaqueValue(store).increment(txid, 1)
    assert store.get_many(["a", "value"]) == [None, None]


def test_a_map_refuses_non_str_keys_and_non_numeric_increments(store: Store) -> None:
    with pytest.raises(TypeError, match="str"):
        TransactionalMap(store).increment(1, {1: 1})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="increment"):
        OpaqueMap(store).increment(1, {"a": "1"})  # type: ignore[dict-item]


def test_a_key_holding_another_kind_of_state_is_a_clear_error(store: Store) -> None:
    TransactionalMap(store).increment(1, {"a": 1})
    store.update(["raw"], lambda cur: {"raw": 5})
    with pytest.raises(ValueError, match=r"'a'.*not opaque state"):
        OpaqueMap(store).increment(2, {"a": 1})
    with pytest.raises(ValueError, match=r"'raw'.*not transactional state"):
        TransactionalMap(store).get("raw")


def test_single_values(store: Store) -> None:
    total = TransactionalValue(store, key="total")
    assert total.get() is None
    assert total.txid is None
    assert total.increment(1, 5) == 5
    assert total.increment(1, 5) == 5
    assert total.update(2, lambda old: old * 10) == 50
    assert (total.get(), total.txid) == (50, 2)

    global_count = OpaqueValue(store)  # key "value": a different key from "total"
    assert global_count.increment(1, 3) == 3
    assert global_count.increment(1, 4) == 4  # a replay with a different batch
    assert global_count.increment(2, 1) == 5
    assert (global_count.get(), global_count.txid) == (5, 2)
    assert total.get() == 50


def test_state_outlives_the_store_object(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SQLiteStore(path, namespace="counts") as s:
        OpaqueMap(s).increment(1, {"a": 2})
    with SQLiteStore(path, namespace="counts") as s:
        counts = OpaqueMap(s)
        assert counts.increment(1, {"a": 3}) == {"a": 3}  # a replay after a restart: recomputed from prev
        assert counts.increment(2, {"a": 1}) == {"a": 4}


# -- coordinator epochs in opaque values -------------------------------------------------


def test_an_opaque_commit_of_the_same_txid_from_an_older_epoch_is_stale() -> None:
    # A committer passed its fence for txid 7 (epoch 1), then stalled; the coordinator that
    # superseded it (epoch 2) replayed txid 7 with another batch, and committed it
    counts = OpaqueMap(MemoryStore("epochs"))
    counts.increment(TransactionAttempt(6, 1, epoch=1), {"a": 10})
    counts.increment(TransactionAttempt(7, 2, epoch=2), {"a": 5})
    # When the stalled commit lands, it changes nothing: epoch 2's batch is the one recorded
    assert counts.increment(TransactionAttempt(7, 3, epoch=1), {"a": 100}) == {"a": 15}
    assert counts.store.get_many(["a"]) == [{"curr": 15, "prev": 10, "txid": 7, "epoch": 2}]
    # while a replay of txid 7 from the same or a newer epoch still replaces its batch
    assert counts.increment(TransactionAttempt(7, 4, epoch=3), {"a": 1}) == {"a": 11}
    # and a plain txid (no epoch known) keeps the rule it always had
    assert counts.increment(7, {"a": 2}) == {"a": 12}


def test_opaque_values_stored_before_epochs_are_read_and_updated() -> None:
    store = MemoryStore("old")
    store.update(["a"], lambda _cur: {"a": {"curr": 3, "prev": 1, "txid": 4}})
    counts = OpaqueMap(store)
    assert counts.get("a") == 3
    assert counts.increment(TransactionAttempt(4, 9, epoch=5), {"a": 1}) == {"a": 2}
    assert store.get_many(["a"]) == [{"curr": 2, "prev": 1, "txid": 4, "epoch": 5}]
