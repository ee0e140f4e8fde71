"""The emit functions components call: the hot path of the whole engine.

They are closures over everything they need (no attribute lookups on
``self``) and append to per-target-task batch lists owned by the executor,
which flushes them when it finishes an input batch (``out`` maps a task to
the bound ``append`` of its list: the lists live as long as the executor).  Anchoring follows
Storm exactly: every (child, anchor) pair gets its own random 64-bit edge id,
XOR-ed into the anchor's ``ackval`` and into the child's ``{root: edge}`` map
for each root of the anchor, so multi-anchoring inside one tree stays exact.

These are the pure-Python twins: where squall/worker/executors/typed_core.pyx is built,
its typed emitters, task state, counters, ids and ack table take their names
at the end of this module (tests/worker/test_typed_core.py holds them equal).
"""

from __future__ import annotations

import functools
import os
import random
from collections.abc import Callable, Collection, Sequence
from typing import Any

from squall.acker.ledger import pack_acks
from squall.topology.component import DEFAULT_STREAM
from squall.topology.tuple import Tuple
from squall.worker.executors.emit_errors import bad_emit
from squall.worker.executors.pending import PendingTrees
from squall.worker.wire.value_types import PLAIN_TYPES


class StreamOut:
    """One output stream of a task: record type, router, direct flag."""

    __slots__ = ("counts", "direct", "fields", "name", "nfields", "record", "route")

    def __init__(self, name: str, record: type, fields: tuple[str, ...], route: Callable, direct: bool):
        self.name = name
        self.record = record
        self.fields = fields
        self.nfields = len(fields)
        self.route = route
        self.direct = direct
        # [emitted, transferred] on this stream: tuples emitted, and copies sent
        # (one per target task), as Storm counts them.  Read by the stats snapshot.
        self.counts = stream_counts()

    def unpacked(self) -> tuple[type, int, Callable, bool, tuple[str, ...], Any, list[int]]:
        """What the emit closures read, as one tuple: a single unpack per emit.

        Item 6 is the target tasks when they never vary (one subscriber
        task, or an all grouping), so that no router is called; item 7 the
        stream's counters.
        """
        return (self.record, self.nfields, self.route, self.direct, self.fields, self.constant, self.counts)

    @property
    def constant(self) -> Any:
        return getattr(self.route, "constant", None)


class TaskState:
    """Mutable per-task state the emit closures share with their executor."""

    __slots__ = ("current", "emitted")

    def __init__(self) -> None:
        self.current: Tuple | None = None
        self.emitted = 0


class AckTable(dict):
    """One turn's acks of a bolt executor, XOR-ed per root: {root: value}.

    XOR is associative, so the acker sees the same sum it would from one
    message per tuple, in one message per root a turn.  A dict, so that the
    pure acking loop (BoltExecutor.on_data) updates it inline.
    """

    def xor(self, root: int, val: int) -> None:
        self[root] = self.get(root, 0) ^ val

    def add(self, tup: Tuple) -> None:
        """A tuple's ack: its edge XOR the edges anchored to it, into each of its roots."""
        am = tup.anchors
        if am:
            av = tup.ackval
            for root, edge in am.items():
                self[root] = self.get(root, 0) ^ edge ^ av

    def drain(self) -> list[tuple[int, int]]:
        """The (root, value) pairs in the order their roots came; the table is left empty."""
        out = list(self.items())
        self.clear()
        return out

    def drain_by(self, ackers: int) -> list[bytes]:
        """The pairs of :meth:`drain`, packed (squall.acker.ledger.PACKED_ACK) one bytes per
        acker: the acker of a root is ``root % ackers`` (the spout chose the root so); the
        table is left empty."""
        if ackers < 1:
            msg = f"ackers must be at least 1, not {ackers}"
            raise ValueError(msg)
        out: list[list[tuple[int, int]]] = [[] for _ in range(ackers)]
        for root, val in self.items():
            out[root % ackers].append((root, val))
        self.clear()
        return [pack_acks(pairs) for pairs in out]


# Values of these types need no further check to cross the wire: msgpack's scalars and
# the types features register (a TransactionAttempt); the registry's own set, grown in place.
_PLAIN = PLAIN_TYPES


def bolt_emitter(component: str, task: int, streams: dict[str, StreamOut],
                 out: dict[int, Callable[[Any], None]], tracking: bool, rand64: Callable[[], int],
                 check: Callable, always_check: bool, capture: Callable | None, auto_anchor: bool,
                 state: TaskState) -> Callable:
    new = tuple.__new__
    make = Tuple
    fromkeys = dict.fromkeys
    plain = _PLAIN
    seq = (list, tuple)
    table = {name: so.unpacked() for name, so in streams.items()}

    def emit(values: Any, anchors: Any = None, stream: str = DEFAULT_STREAM, direct_task: Any = None):
        so = table.get(stream)
        if so is None or type(values) not in seq:
            raise bad_emit(component, stream, streams, values, direct_task)
        record, nfields, route, direct, fields, constant, counts = so
        if len(values) != nfields or direct is (direct_task is None):
            raise bad_emit(component, stream, streams, values, direct_task)
        if always_check:
            check(values, fields, component, stream)
        else:
            for v in values:
                if type(v) not in plain:
                    check(values, fields, component, stream)
                    break
        vals = new(record, values)
        tasks = constant if constant is not None else route(vals, direct_task)
        state.emitted += 1
        counts[0] += 1
        counts[1] += len(tasks)
        if capture is not None:
            capture(component, stream, vals)
        if anchors is None:
            if auto_anchor and tracking:
                a = state.current
                if a is not None:
                    am = a.anchors
                    if am:
                        # The common case, one anchor: no loop over anchors.
                        if len(am) == 1:
                            # and one tree: a one-entry dict literal, no fromkeys call
                            for root in am:
                                for t in tasks:
                                    e = rand64()
                                    a.ackval ^= e
                                    out[t](make(e, component, stream, task, vals, {root: e}))
                        else:
                            for t in tasks:
                                e = rand64()
                                a.ackval ^= e
                                out[t](make(e, component, stream, task, vals, fromkeys(am, e)))
                        return tasks
            tup = make(None, component, stream, task, vals, None)
            for t in tasks:
                out[t](tup)
            return tasks
        if type(anchors) is Tuple:
            anchors = (anchors,)
        if tracking and anchors:
            for t in tasks:
                amap: dict[int, int] | None = None
                first = None
                for a in anchors:
                    am = a.anchors
                    if am:
                        e = rand64()
                        a.ackval ^= e
                        if amap is None:
                            amap = fromkeys(am, e)
                            first = e
                        else:
                            for root in am:
                                amap[root] = amap.get(root, 0) ^ e
                out[t](make(first, component, stream, task, vals, amap))
        else:
            tup = make(None, component, stream, task, vals, None)
            for t in tasks:
                out[t](tup)
        return tasks

    return emit


class SpoutTracker:
    """A spout executor's pending trees: root id -> (task, message id, emit time)."""

    __slots__ = ("acker_tasks", "count", "immediate", "inits", "local_ackers", "pending")

    def __init__(self, acker_tasks: list[int], local_tasks: Collection[int] = ()) -> None:
        self.pending = PendingTrees()
        self.count = 0
        self.acker_tasks = acker_tasks
        # Indices (into acker_tasks) of the ackers in this worker: see new_roots.
        self.local_ackers = [i for i, t in enumerate(acker_tasks) if t in local_tasks]
        self.inits: dict[int, list[tuple[int, int, int]]] = {t: [] for t in acker_tasks}
        # Message ids to ack at once: no ackers, or emitted to no task at all.
        self.immediate: list[tuple[int, Any]] = []


def new_roots(rand64: Callable[[], int], n_ackers: int, local: Sequence[int]) -> Callable[[], int]:
    """Random 64-bit root ids whose acker (``root mod n_ackers``) is in this worker when one is.

    A tree's acker is chosen by its root id, so choosing the root's residue
    keeps the spout's init and the acker's ack or fail inside the worker (and,
    for a tree no bolt of another worker touches, every ack of it).  Only
    log2(n_ackers) bits of the root are chosen; the rest stay random.
    """
    if not local or len(local) == n_ackers:
        return rand64
    choices = tuple(local)
    m = len(choices)
    top = (1 << 64) - n_ackers
    turn = 0

    def new_root() -> int:
        nonlocal turn
        turn += 1
        root = rand64()
        root += choices[turn % m] - root % n_ackers
        return root if root < top else root - n_ackers

    return new_root


def spout_emitter(component: str, task: int, streams: dict[str, StreamOut],
                  out: dict[int, Callable[[Any], None]], rand64: Callable[[], int], check: Callable,
                  always_check: bool, capture: Callable | None, tracker: SpoutTracker,
                  now: Callable[[], float], state: TaskState) -> Callable:
    new = tuple.__new__
    make = Tuple
    plain = _PLAIN
    seq = (list, tuple)
    table = {name: so.unpacked() for name, so in streams.items()}
    acker_tasks = tracker.acker_tasks
    n_ackers = len(acker_tasks)
    new_root = new_roots(rand64, n_ackers, tracker.local_ackers)
    inits = tracker.inits
    immediate = tracker.immediate
    pending = tracker.pending

    def emit(values: Any, tup_id: Any = None, stream: str = DEFAULT_STREAM, direct_task: Any = None):
        so = table.get(stream)
        if so is None or type(values) not in seq:
            raise bad_emit(component, stream, streams, values, direct_task)
        record, nfields, route, direct, fields, constant, counts = so
        if len(values) != nfields or direct is (direct_task is None):
            raise bad_emit(component, stream, streams, values, direct_task)
        if always_check:
            check(values, fields, component, stream)
        else:
            for v in values:
                if type(v) not in plain:
                    check(values, fields, component, stream)
                    break
        vals = new(record, values)
        tasks = constant if constant is not None else route(vals, direct_task)
        state.emitted += 1
        counts[0] += 1
        counts[1] += len(tasks)
        if capture is not None:
            capture(component, stream, vals)
        if tup_id is None or not n_ackers or not tasks:
            tup = make(None, component, stream, task, vals, None)
            for t in tasks:
                out[t](tup)
            if tup_id is not None:
                immediate.append((task, tup_id))
            return tasks
        root = new_root()
        val = 0
        for t in tasks:
            e = rand64()
            val ^= e
            out[t](make(e, component, stream, task, vals, {root: e}))
        inits[acker_tasks[root % n_ackers]].append((root, val, task))
        pending.put_new(root, (task, tup_id, now()))
        tracker.count += 1
        return tasks

    return emit


def stream_counts() -> Any:
    """A stream's [emitted, transferred] counters."""
    return [0, 0]


def random_ids() -> Callable[[], int]:
    """Random 64-bit tuple ids, never counters: Storm's odds of a false completion rest
    on them.  One generator per executor, no lock shared."""
    rng = random.Random(int.from_bytes(os.urandom(16), "little"))
    return functools.partial(rng.getrandbits, 64)


# The pure-Python twins, kept as the reference the typed ones are tested against.
PureTaskState, pure_bolt_emitter, pure_spout_emitter = TaskState, bolt_emitter, spout_emitter
PureAckTable = AckTable
pure_stream_counts, pure_random_ids = stream_counts, random_ids

try:  # the same, typed in C (squall/worker/executors/typed_core.pyx), where it was built
    from squall.worker.executors.typed_core import (  # type: ignore[assignment]  # noqa: F811
        AckTable,  # type: ignore[assignment]  # noqa: F811
        TaskState,  # type: ignore[assignment]  # noqa: F811
        bolt_emitter,
        spout_emitter,
    )
    from squall.worker.executors.typed_core import RandomIds as random_ids  # type: ignore[assignment]  # noqa: F811
    from squall.worker.executors.typed_core import StreamCounts as stream_counts  # type: ignore[assignment]  # noqa: F811
except ImportError:
    pass
