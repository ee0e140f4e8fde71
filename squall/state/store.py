"""The key-value seam under committer state, and its in-process implementation.

A committer bolt of a transactional topology updates external state exactly
once by storing, next to each value, the txid that last wrote it
(:mod:`squall.state.values` holds those rules).  The rules need only one thing
from the storage: read some keys and write new values for them *atomically*,
so that no other committer (thread or process) slips a write in between.

:class:`Store` is that seam, and deliberately no more than three methods --
``get_many``, ``update``, ``close`` -- so that a networked store (Redis, with
``WATCH``/``MULTI`` or a Lua script) can implement it as easily as
:class:`MemoryStore` (here) and :class:`~squall.state.sqlite.SQLiteStore` do.

Values are JSON: every store keeps JSON text, so that an in-memory store
refuses exactly what a durable one would, and a value read back is the same
whichever store it came from (tuples come back as lists).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from squall.errors import SerializationError, SquallError

UpdateFn = Callable[[dict[str, Any]], dict[str, Any]]


class StoreError(SquallError):
    """A state store could not be opened or used (the message names which)."""


class Store(Protocol):
    """Maps string keys to JSON-able values within one namespace.

    The whole contract a committer's state needs; keep it to these three
    methods so that any backend (in-process, SQLite, networked) can offer it.
    """

    def get_many(self, keys: list[str]) -> list[Any | None]:
        """The values of ``keys``, in order; None for an absent key."""
        ...

    def update(self, keys: list[str], fn: UpdateFn) -> dict[str, Any]:
        """Atomically read ``keys`` (None when absent), write what ``fn(current)`` returns.

        ``fn`` returns new values for some or all of ``keys``; they all land
        or none do, and no other writer interleaves between read and write.
        If ``fn`` raises, nothing is written and the exception propagates.
        ``fn`` must not call the store itself.  Returns what ``fn`` returned.
        """
        ...

    def close(self) -> None:
        """Release the store's resources; idempotent."""
        ...


def check_keys(keys: Iterable[Any]) -> list[str]:
    """``keys`` as a list, or a TypeError naming the first key that is not a str."""
    if isinstance(keys, (str, bytes)):
        # A lone string is iterable too: it would silently become one key per character.
        msg = f"keys must be a list of str, not a single {type(keys).__name__}: {keys!r}"
        raise TypeError(msg)
    keys = list(keys)
    for key in keys:
        if not isinstance(key, str):
            msg = f"state keys must be str, not {type(key).__name__}: {key!r}"
            raise TypeError(msg)
    return keys


def encode(key: str, value: Any) -> str:
    """JSON text of ``value``, or a SerializationError naming ``key``."""
    try:
        # allow_nan=False: NaN and Infinity are not JSON; another reader (Redis, Java) would refuse them.
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        msg = (f"the value for state key {key!r} cannot be stored: {e}; "
               "use None, bool, int, float, str, lists and dicts with string keys")
        raise SerializationError(msg) from e


def decode(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def encode_writes(keys: list[str], written: Any) -> dict[str, str]:
    """JSON text of each value ``fn`` returned, checked before anything is written.

    Encoding everything first is what makes a write all-or-nothing in a store
    that has no transactions (:class:`MemoryStore`): a bad value fails the
    update before the first key changes.
    """
    if not isinstance(written, Mapping):
        msg = f"a state update function must return a dict of new values, not {type(written).__name__}"
        raise TypeError(msg)
    allowed = set(keys)
    out = {}
    for key, value in written.items():
        if key not in allowed:
            # Writing a key that was not read (so not locked, in a networked store) breaks atomicity.
            msg = f"a state update function returned key {key!r}, which is not among the keys read: {keys}"
            raise ValueError(msg)
        out[key] = encode(key, value)
    return out


class MemoryStore:
    """A :class:`Store` in this process's memory: for tests and local mode.

    Thread-safe (one lock around every operation); two instances share
    nothing, whatever their namespaces.
    """

    def __init__(self, namespace: str = "default") -> None:
        self.namespace = namespace
        self._data: dict[str, str] = {}
        # Reentrant: a get_many from inside an update's fn must not deadlock on this thread.
        self._lock = threading.RLock()
        self._closed = False

    def __repr__(self) -> str:
        return f"MemoryStore(namespace={self.namespace!r})"

    def _check_open(self) -> None:
        if self._closed:
            msg = f"{self!r} is closed"
            raise StoreError(msg)

    def get_many(self, keys: list[str]) -> list[Any | None]:
        keys = check_keys(keys)
        with self._lock:
            self._check_open()
            return [decode(self._data.get(key)) for key in keys]

    def update(self, keys: list[str], fn: UpdateFn) -> dict[str, Any]:
        keys = check_keys(keys)
        with self._lock:
            self._check_open()
            current = {key: decode(self._data.get(key)) for key in keys}
            written = fn(current)
            self._data.update(encode_writes(keys, written))
            return written

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._data.clear()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
