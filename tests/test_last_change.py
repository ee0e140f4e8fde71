"""squall.clock.LastChange: a value's age as the time since it last changed, on a local clock."""

from __future__ import annotations

from squall.clock import LastChange


def test_an_age_counts_from_the_last_change_seen_not_from_the_value() -> None:
    seen = LastChange()
    assert seen.age("w", 5000.0, local=10.0) == 0  # first seen: new, unless told otherwise
    assert seen.age("w", 5000.0, local=13.0) == 3  # unchanged for 3 s of the local clock
    assert seen.age("w", 9999.0, local=14.0) == 0  # changed, whatever it changed to
    assert seen.age("x", 1.0, local=14.0, first_age=7.5) == 7.5
    seen.forget("w")
    assert seen.age("w", 9999.0, local=20.0) == 0
    seen.forget_where(lambda key: key in ("w", "x"))
    assert seen.age("x", 1.0, local=30.0) == 0
