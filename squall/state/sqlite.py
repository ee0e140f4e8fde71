"""A durable :class:`~squall.state.store.Store` in one SQLite file on the node's disk.

Committer bolts of the same topology may run in different worker processes
on the node and update the same keys: each ``update`` is one ``BEGIN
IMMEDIATE`` transaction, which takes the file's write lock before reading, so
concurrent committers serialize on the file (waiting up to ``timeout``
seconds) and never interleave between a read and its write.  WAL journal
mode lets readers go on while a writer holds that lock.

One connection per store object, guarded by a lock: threads of one process
take turns (the file lock would serialize their writes anyway).  Open the
store in the process that uses it; a connection does not survive a fork.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from squall.state.store import StoreError, UpdateFn, check_keys, decode, encode_writes

_TABLE = """CREATE TABLE IF NOT EXISTS squall_state (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (namespace, key)
)"""

_WRITE = "INSERT OR REPLACE INTO squall_state (namespace, key, value) VALUES (?, ?, ?)"

# SQLite before 3.32 allows at most 999 host parameters in a statement; one is the namespace.
_CHUNK = 500


class SQLiteStore:
    """A :class:`~squall.state.store.Store` in the SQLite file at ``path``.

    Creates the parent directory and the table if missing.  Keys live under
    ``namespace``: stores on the same file with different namespaces share
    nothing.  ``timeout`` is how long an operation waits for another
    process's write lock before failing with :class:`StoreError`.
    """

    def __init__(self, path: str | os.PathLike[str], namespace: str = "default",
                 timeout: float = 30.0) -> None:
        if not isinstance(namespace, str):
            msg = f"a state namespace must be a str, not {type(namespace).__name__}: {namespace!r}"
            raise TypeError(msg)
        self.path = os.fspath(path)
        self.namespace = namespace
        self.timeout = timeout
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = _connect(self.path, timeout)

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r}, namespace={self.namespace!r})"

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            msg = f"{self!r} is closed"
            raise StoreError(msg)
        return self._conn

    def _error(self, e: sqlite3.Error) -> StoreError:
        msg = f"state store {self.path!r} (namespace {self.namespace!r}): {e}"
        if "locked" in str(e):
            msg += f" (another process held its write lock for over {self.timeout}s)"
        return StoreError(msg)

    def _read(self, conn: sqlite3.Connection, keys: list[str]) -> dict[str, Any]:
        unique = list(dict.fromkeys(keys))
        found: dict[str, str] = {}
        for i in range(0, len(unique), _CHUNK):
            chunk = unique[i:i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT key, value FROM squall_state WHERE namespace = ? AND key IN ({marks})"
            rows = conn.execute(sql, [self.namespace, *chunk])
            found.update(rows)
        return {key: decode(found.get(key)) for key in keys}

    def get_many(self, keys: list[str]) -> list[Any | None]:
        keys = check_keys(keys)
        with self._lock:
            conn = self._connection()
            try:
                # One read transaction: a large key list read in chunks still sees a single snapshot.
                conn.execute("BEGIN")
                try:
                    values = self._read(conn, keys)
                finally:
                    conn.execute("COMMIT")
            except sqlite3.Error as e:
                raise self._error(e) from e
        return [values[key] for key in keys]

    def update(self, keys: list[str], fn: UpdateFn) -> dict[str, Any]:
        keys = check_keys(keys)
        with self._lock:
            conn = self._connection()
            try:
                # IMMEDIATE: take the write lock before reading, so no other process writes in between.
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as e:
                raise self._error(e) from e
            try:
                written = fn(self._read(conn, keys))
                rows = [(self.namespace, key, text) for key, text in encode_writes(keys, written).items()]
                conn.executemany(_WRITE, rows)
                conn.execute("COMMIT")
            except BaseException as e:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if isinstance(e, sqlite3.Error):
                    raise self._error(e) from e
                raise
        return written

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _connect(path: str, timeout: float) -> sqlite3.Connection:
    """An open connection to ``path`` with the table in place, or a StoreError naming the path."""
    in_memory = path == ":memory:" or path.startswith("file:")
    if not in_memory:
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            msg = f"cannot create the directory of state store {path!r}: {e}"
            raise StoreError(msg) from e
    conn = None
    try:
        # isolation_level=None: no implicit transactions; update() issues BEGIN IMMEDIATE itself.
        conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False,
                               uri=path.startswith("file:"))
        if not in_memory:
            _enable_wal(conn, timeout)
        conn.execute(_TABLE)
    except sqlite3.Error as e:
        if conn is not None:
            conn.close()
        msg = f"cannot open state store {path!r}: {e}"
        raise StoreError(msg) from e
    return conn


def _enable_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Switch the file to WAL, waiting up to ``timeout`` for processes opening it at the same time.

    WAL persists in the file, so only its first opener switches.  The switch
    needs an exclusive lock, and when another process holds a lock SQLite
    answers "database is locked" at once instead of calling the busy handler:
    hence the retry loop here, where every other statement simply waits.
    """
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() >= deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
