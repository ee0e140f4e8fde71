"""The built-in aggregators (Storm's ``streams.operations.aggregators``)."""

from __future__ import annotations

from typing import Any

from squall.streams.functions import CombinerAggregator


class Count(CombinerAggregator):
    """How many values: an ``int``."""

    def init(self) -> int:
        return 0

    def apply(self, acc: int, value: Any) -> int:
        return acc + 1

    def merge(self, acc1: int, acc2: int) -> int:
        return acc1 + acc2


class LongSum(CombinerAggregator):
    """The sum as an ``int``: each value taken by ``int(value)``, which truncates a
    float toward zero as Java's ``longValue()`` does."""

    def init(self) -> int:
        return 0

    def apply(self, acc: int, value: Any) -> int:
        return acc + int(value)

    def merge(self, acc1: int, acc2: int) -> int:
        return acc1 + acc2
