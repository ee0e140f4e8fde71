"""Storm's RotatingMap: a dict whose entries expire in cohorts.

Entries live in ``buckets`` dicts.  ``put`` moves an entry to the newest
bucket (resetting its clock); ``rotate`` drops the oldest bucket and returns
what was in it.  Rotated every ``T / (buckets - 1)``, an entry expires
between ``T`` and ``T * buckets / (buckets - 1)`` after its last put.
"""

from __future__ import annotations

from typing import Any


class RotatingMap:
    __slots__ = ("_buckets",)

    def __init__(self, buckets: int = 3) -> None:
        if buckets < 2:
            msg = f"a RotatingMap needs at least 2 buckets, got {buckets}"
            raise ValueError(msg)
        self._buckets: list[dict[Any, Any]] = [{} for _ in range(buckets)]

    @property
    def buckets(self) -> list[dict[Any, Any]]:
        """The buckets, newest first, for a caller that inlines ``pop`` and ``put``
        in a hot loop (the acker's ledger); a key lives in at most one of them."""
        return self._buckets

    def put(self, key: Any, value: Any) -> None:
        buckets = self._buckets
        buckets[0][key] = value
        for bucket in buckets[1:]:
            bucket.pop(key, None)

    def put_new(self, key: Any, value: Any) -> None:
        """``put`` for a key known to be absent (a fresh random id): one dict store."""
        self._buckets[0][key] = value

    def get(self, key: Any, default: Any = None) -> Any:
        for bucket in self._buckets:
            if key in bucket:
                return bucket[key]
        return default

    def pop(self, key: Any, default: Any = None) -> Any:
        for bucket in self._buckets:
            if key in bucket:
                return bucket.pop(key)
        return default

    def __contains__(self, key: Any) -> bool:
        return any(key in bucket for bucket in self._buckets)

    def __len__(self) -> int:
        return sum(len(bucket) for bucket in self._buckets)

    def rotate(self) -> dict[Any, Any]:
        """Expire the oldest bucket; returns its entries."""
        dead = self._buckets.pop()
        self._buckets.insert(0, {})
        return dead
