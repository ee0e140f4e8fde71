"""Package attributes imported on first use (PEP 562).

``import squall.multilang.child`` runs in every Python multilang child: it
must not pay for the local cluster, structlog and the worker (~100 ms per
child start) just because ``squall/__init__`` names them.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, namespace: dict[str, Any],
                 exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: ``exports`` maps a name to its module.

    That table is the package's one list of what it exports: its ``__all__`` is
    ``sorted(exports)``, and tests/test_layers.py reads its module paths as imports.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            msg = f"module {package!r} has no attribute {name!r}"
            raise AttributeError(msg)
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # the next lookup is a plain global
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__


class Lazy:
    """A resource made on first use, once, whichever thread asks first (a
    worker's executors start together; only one ZooKeeper client is wanted)."""

    def __init__(self, make: Any) -> None:
        self._make = make
        self._value: Any = None
        self._lock = threading.Lock()

    def get(self) -> Any:
        with self._lock:
            if self._value is None:
                self._value = self._make()
            return self._value

    def close(self) -> None:
        with self._lock:
            if self._value is not None:
                self._value.close()
                self._value = None


def shared_resource(resources: dict[str, Any], key: str, make: Callable[[], Any]) -> Any:
    """The worker resource ``key`` (Storm's worker resources: ``context.resources``),
    made by ``make`` on first use, once, whichever task asks first; the worker closes
    it when it stops."""
    lazy = resources.get(key)
    if lazy is None:
        lazy = resources.setdefault(key, Lazy(make))
    return lazy.get()
