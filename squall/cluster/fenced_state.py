"""The coordination store of transactional topologies and checkpointed state (Storm's TransactionalState):
its interface, its layout and value format, and its in-memory twin.

The coordinator keeps the current txid and each transaction's metadata here,
partitioned emitters each partition's metadata: JSON values at paths under
``<transactional.zookeeper.root>/<transactional id>/<subdir>/``.  On a
cluster that is ZooKeeper (``squall.cluster.transactional_state``); local
mode keeps it in a :class:`MemoryBackend` that lives as long as the
``LocalCluster``, unless ``transactional.zookeeper.servers`` is set.

Values are stored as JSON text in every backend, so that local mode refuses
exactly what ZooKeeper would, and a value read back is the same whether it
was just written or read after a restart (tuples come back as lists).
"""

from __future__ import annotations

import json
import threading
from typing import Any, Protocol

from squall.cluster.fence import Fence, FencedOut, holds
from squall.errors import SerializationError

# The worker resource under which a runtime offers its backend (see Worker.resources).
BACKEND_RESOURCE = "transactional.state"

# Layout below <transactional.zookeeper.root>/<transactional id>/, which every
# state of that id knows: fences are checked against the epoch and current txid.
COORDINATOR = "coordinator"  # the coordinator's own subtree, holding:
CURRENT_TXID = "currtx"  # the first uncommitted txid
EPOCH = "epoch"  # the latest epoch a coordinator claimed
HOLDERS = "holders"  # holders/<epoch>: there while that epoch's coordinator runs


def encode_value(value: Any, what: str) -> bytes:
    """JSON bytes of ``value``, or a SerializationError naming ``what`` it was."""
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError) as e:
        msg = (f"{what} cannot be stored as transactional state: {e}; "
               "use None, bool, int, float, str, lists and dicts with string keys")
        raise SerializationError(msg) from e


def decode_value(data: bytes | None) -> Any:
    return json.loads(data.decode()) if data else None


class TransactionalState(Protocol):
    """JSON values at '/'-separated paths relative to one subtree of a
    transactional id, and that id's epochs (see squall.cluster.fence).

    A write given a ``fence`` is made only if the fence holds, atomically with
    the check; else it raises :class:`FencedOut` and writes nothing.
    """

    def set_data(self, path: str, value: Any, fence: Fence | None = None) -> None: ...

    def create(self, path: str, value: Any, fence: Fence | None = None) -> Any:
        """Write-once: store ``value`` unless the path holds one already; the value stored."""

    def get_data(self, path: str, default: Any = None) -> Any:
        """The value, or ``default`` when the path does not exist."""

    def list(self, path: str) -> list[str]:
        """The children's names, [] when the path does not exist."""

    def delete(self, path: str, fence: Fence | None = None) -> None:
        """Remove the path and everything below it; absent is fine.  Fenced: a leaf only."""

    def claim_epoch(self) -> int:
        """A new epoch for this transactional id, higher than every one before,
        held (see epoch_held) until released or this process's session ends."""

    def epoch(self) -> int:
        """The latest epoch claimed, 0 when none was."""

    def epoch_held(self, epoch: int) -> bool:
        """Is the coordinator that claimed ``epoch`` still there?"""

    def release_epoch(self, epoch: int) -> None:
        """The coordinator of ``epoch`` is stopping."""

    def check(self, fence: Fence) -> None:
        """Raise FencedOut unless ``fence`` holds now."""


class StateBackend(Protocol):
    def open(self, transactional_id: str, subdir: str, owner: str = COORDINATOR) -> TransactionalState:
        """The state at ``<root>/<transactional_id>/<subdir>``, fenced by the epoch and
        current txid that ``owner`` (a subdir) keeps: the coordinator's by default."""

    def close(self) -> None: ...


class MemoryState:
    def __init__(self, store: dict[str, bytes], lock: threading.Lock, prefix: str, owner: str) -> None:
        self._store = store
        self._lock = lock
        self._prefix = prefix
        self._epoch_key = f"{owner}/{EPOCH}"
        self._holders = f"{owner}/{HOLDERS}"
        self._current_key = f"{owner}/{CURRENT_TXID}"

    def _key(self, path: str) -> str:
        return f"{self._prefix}/{path.strip('/')}" if path.strip("/") else self._prefix

    def _check(self, fence: Fence | None) -> None:
        """Under the lock."""
        if fence is None:
            return
        epoch = decode_value(self._store.get(self._epoch_key)) or 0
        current = decode_value(self._store.get(self._current_key))
        if not holds(fence, epoch, current):
            raise FencedOut(fence, epoch, current)

    def check(self, fence: Fence) -> None:
        with self._lock:
            self._check(fence)

    def set_data(self, path: str, value: Any, fence: Fence | None = None) -> None:
        data = encode_value(value, f"the value at {path!r}")
        with self._lock:
            self._check(fence)
            self._store[self._key(path)] = data

    def create(self, path: str, value: Any, fence: Fence | None = None) -> Any:
        data = encode_value(value, f"the value at {path!r}")
        with self._lock:
            self._check(fence)
            return decode_value(self._store.setdefault(self._key(path), data))

    def claim_epoch(self) -> int:
        with self._lock:
            epoch = (decode_value(self._store.get(self._epoch_key)) or 0) + 1
            self._store[self._epoch_key] = encode_value(epoch, "an epoch")
            self._store[f"{self._holders}/{epoch}"] = b"1"
            return epoch

    def epoch(self) -> int:
        with self._lock:
            return decode_value(self._store.get(self._epoch_key)) or 0

    def epoch_held(self, epoch: int) -> bool:
        with self._lock:
            return f"{self._holders}/{epoch}" in self._store

    def release_epoch(self, epoch: int) -> None:
        with self._lock:
            self._store.pop(f"{self._holders}/{epoch}", None)

    def get_data(self, path: str, default: Any = None) -> Any:
        with self._lock:
            data = self._store.get(self._key(path))
        return default if data is None else decode_value(data)

    def list(self, path: str) -> list[str]:
        base = self._key(path) + "/"
        with self._lock:
            names = {key[len(base):].split("/", 1)[0] for key in self._store if key.startswith(base)}
        return sorted(names)

    def delete(self, path: str, fence: Fence | None = None) -> None:
        key = self._key(path)
        with self._lock:
            self._check(fence)
            for k in [k for k in self._store if k == key or k.startswith(key + "/")]:
                del self._store[k]


class MemoryBackend:
    """Transactional state in this process, for local mode: it outlives the
    topologies of one LocalCluster, so a resubmission continues its txids."""

    def __init__(self, root: str = "/transactional") -> None:
        self.root = root.rstrip("/")
        self._store: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def open(self, transactional_id: str, subdir: str, owner: str = COORDINATOR) -> MemoryState:
        base = f"{self.root}/{transactional_id}"
        return MemoryState(self._store, self._lock, f"{base}/{subdir}", f"{base}/{owner}")

    def paths(self) -> list[str]:
        """Every stored path (for tests and debugging)."""
        with self._lock:
            return sorted(self._store)

    def close(self) -> None:
        """Nothing to release: the state lives as long as the object."""
