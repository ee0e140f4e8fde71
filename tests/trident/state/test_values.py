"""OpaqueValue and TransactionalValue: Storm's StateTest.testOpaqueValue, the epoch a
TransactionAttempt adds, and the JSON forms stores keep."""

from __future__ import annotations

import pytest

from squall.transactional.attempt import TransactionAttempt
from squall.trident.state import OpaqueValue, StaleBatchError, StateType, TransactionalValue
from squall.trident.state.base import batch_of


def test_an_opaque_value_reads_and_updates_as_storms() -> None:
    value = OpaqueValue(8, "v1", "v0")
    same_txid = value.update(8, "v2")
    next_txid = value.update(9, "v2")

    assert value.get(None) == "v1"  # a batch without a txid reads the current value
    assert value.get(100) == "v1"
    assert value.get(9) == "v1"
    assert value.get(8) == "v0"  # a replay of txid 8 reads what was there before it
    with pytest.raises(StaleBatchError, match="txid 7 is behind"):
        value.get(7)
    assert (value.prev, value.curr) == ("v0", "v1")
    # A replay of txid 8 starts again from the value before it...
    assert (same_txid.prev, same_txid.curr, same_txid.curr_txid) == ("v0", "v2", 8)
    assert same_txid != value
    # ...and txid 9 moves prev on.
    assert (next_txid.prev, next_txid.curr, next_txid.curr_txid) == ("v1", "v2", 9)
    assert next_txid != value
    with pytest.raises(StaleBatchError):
        value.update(7, "v3")


def test_a_replay_from_an_older_coordinator_epoch_is_refused() -> None:
    # Given txid 5 written by the coordinator of epoch 2
    value = OpaqueValue(5, 10, 4, epoch=2)
    # Then the superseded coordinator (epoch 1) replaying txid 5 must not overwrite it,
    with pytest.raises(StaleBatchError, match=r"txid 5 \(coordinator epoch 1\)"):
        value.update(5, 99, epoch=1)
    # while the same or a newer epoch replays it from prev, and epochs unknown on either side do too.
    assert value.update(5, 7, epoch=3) == OpaqueValue(5, 7, 4, epoch=3)
    assert value.get(5, epoch=2) == 4
    assert value.get(5) == 4
    assert OpaqueValue(5, 10, 4).get(5, epoch=1) == 4


def test_batch_of_reads_ints_none_and_transaction_attempts() -> None:
    assert batch_of(3) == (3, None)
    assert batch_of(None) == (None, None)
    assert batch_of(TransactionAttempt(7, 12345, epoch=4)) == (7, 4)
    for bad in (True, -1, "3", 2.0):
        with pytest.raises(ValueError, match="a batch txid must be an int >= 0"):
            batch_of(bad)


def test_json_forms_are_squall_state_values_forms_and_round_trip() -> None:
    assert TransactionalValue(3, 5).to_json() == {"value": 5, "txid": 3}
    assert OpaqueValue(3, 6, 4).to_json() == {"curr": 6, "prev": 4, "txid": 3}
    assert OpaqueValue(3, 6, 4, epoch=2).to_json() == {"curr": 6, "prev": 4, "txid": 3, "epoch": 2}
    for value in (OpaqueValue(3, [1, "a"], None), OpaqueValue(None, 1, 0), OpaqueValue(1, 2, 3, 4)):
        assert OpaqueValue.from_json(value.to_json()) == value
    assert TransactionalValue.from_json(TransactionalValue(None, {"a": 1}).to_json()) == TransactionalValue(
        None, {"a": 1})


@pytest.mark.parametrize(("kind", "data"), [
    (OpaqueValue, 5), (OpaqueValue, {"value": 5, "txid": 1}),
    (OpaqueValue, {"curr": 1, "prev": 0, "txid": "1"}),
    (TransactionalValue, {"curr": 1, "prev": 0, "txid": 1}), (TransactionalValue, [1, 5]),
])
def test_a_stored_value_of_another_form_is_a_clear_error_naming_the_key(kind: type, data: object) -> None:
    with pytest.raises(ValueError, match=r"under key \['the'\].*same store and namespace"):
        kind.from_json(data, ["the"])


def test_state_type_reads_members_names_and_values() -> None:
    assert StateType.of("opaque") is StateType.OPAQUE
    assert StateType.of("NON_TRANSACTIONAL") is StateType.NON_TRANSACTIONAL
    assert StateType.of(StateType.TRANSACTIONAL) is StateType.TRANSACTIONAL
    with pytest.raises(ValueError, match="one of"):
        StateType.of("exactly-once")
