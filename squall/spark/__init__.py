"""The Spark bolt and the shared Spark Connect server it works through.

    from squall.spark import SparkBolt

Spark itself (``pyspark[connect]``) is an optional dependency:
``pip install 'squall[spark]'``.  Importing this package imports neither
pyspark nor its submodules; the names below load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "SparkBolt": "squall.spark.bolt",
    "ConnectServer": "squall.spark.server",
    "ProcessServer": "squall.spark.local",
    "budget_warnings": "squall.spark.batching",
    "ROW_COLUMN": "squall.spark.schema",
    "ROWS_COLUMN": "squall.spark.schema",
}

__all__ = ["ROWS_COLUMN", "ROW_COLUMN", "ConnectServer", "ProcessServer", "SparkBolt", "budget_warnings"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        msg = f"module 'squall.spark' has no attribute {name!r}"
        raise AttributeError(msg)
    return getattr(importlib.import_module(module), name)
