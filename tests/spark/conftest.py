"""A real Spark Connect server, started once for the whole test run.

It is local mode's own per-process server (:class:`squall.spark.local.ProcessServer`):
every Spark bolt of every test topology in this process finds it without a
``spark.remote``, as local mode's bolts do.  Starting it costs 10-20 s (a
JVM and a warm-up query), paid once.  Without Java the Spark tests are
skipped locally and fail in CI.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]

SERVER_CONF: dict[str, Any] = {
    "spark.master": "local[2]",
    "spark.connect.server.conf": {"spark.sql.shuffle.partitions": 2},
}


def _missing(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"Spark tests need {reason} in CI")
    pytest.skip(f"Spark tests need {reason}")


@pytest.fixture(scope="session")
def spark_available() -> None:
    if shutil.which("java") is None:
        _missing("Java 17 on PATH")
    if importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("pyarrow") is None:
        _missing("pip install -e '.[test]' (pyspark[connect])")


@pytest.fixture(scope="session")
def spark_server(spark_available: None) -> Iterator[Any]:
    from squall.spark.local import ProcessServer

    server = ProcessServer.get(SERVER_CONF)
    yield server
    ProcessServer.stop()


@pytest.fixture(scope="session")
def enrich_example() -> ModuleType:
    """examples/spark/enrich.py, imported as a module."""
    name = "squall_example_spark_enrich"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, REPO / "examples" / "spark" / "enrich.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module
