# cython: boundscheck=False, wraparound=False, initializedcheck=False
"""The emit and ack of one tuple: the hot path of the whole engine.

A component's ``emit`` is the bound method of an emitter made here for its
task: it checks the values, makes the values record, asks the stream's router
for the target tasks and appends a Tuple to each target's batch (``out`` maps a
task to the bound ``append`` of the executor's list for it, or of a
:class:`~squall.worker.wire.codec.RemoteBatch` that packs rows for another
worker as they are emitted).  Anchoring follows Storm exactly: every (child,
anchor) pair gets its own random 64-bit edge id, XOR-ed into the anchor's
``ackval`` and into the child's ``{root: edge}`` map for each root of the
anchor, so multi-anchoring inside one tree stays exact.  A bolt's acks of a
turn are summed in squall/worker/executors/acks.py.

One source for both runs: the interpreter runs this file as it is, and
``python -m squall.compiled build`` compiles it with the C types of
``emit.pxd`` (Cython's pure-Python mode).  Built, the numbers acking needs
are C integers, never Python objects: edge and root ids from a xoshiro256**
generator per executor (:class:`RandomIds`), the anchor's XOR, a tuple of one
tree with its root and edge inline (tuple.pxd's helpers read and fill a Tuple's
C fields; in the interpreter they read its plain slots), the acks summed in C
arrays.  tests/worker/test_emit.py runs under both.
"""

from __future__ import annotations

import functools
import os
import random
from collections.abc import Callable, Collection
from typing import Any

import cython

from squall.topology.component import DEFAULT_STREAM
from squall.worker.executors.emit_errors import bad_emit
from squall.worker.executors.pending import PendingTrees
from squall.worker.wire.value_types import PLAIN_TYPES

if not cython.compiled:  # what emit.pxd cimports, in the interpreter
    from squall.topology.tuple_fields import (
        add_ack,
        bare_tuple,
        filled_record,
        is_values_record,
        one_tree,
        root_of,
        roots_of,
        set_anchors,
        tree_tuple,
    )
    from squall.worker.wire.codec import RemoteBatch

MASK64 = 0xFFFF_FFFF_FFFF_FFFF  # (built, the C integers wrap by themselves: a no-op)


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
        # Tuples emitted, and copies sent (one per target task), as Storm counts them:
        # the emitters count into it, the stats snapshot reads it.
        self.counts = StreamCounts()

    @property
    def constant(self) -> Any:
        """The target tasks when they never vary (one subscriber task, or an all
        grouping), so that no router is called; else None."""
        return getattr(self.route, "constant", None)


# -- ids -----------------------------------------------------------------------


def rotl(x: int, k: int) -> int:
    return ((x << k) | (x >> (64 - k))) & MASK64


@cython.final
@cython.cclass
class RandomIds:
    """Random 64-bit ids (xoshiro256**), never counters: Storm's odds of a false
    completion rest on them.  Call it for an int; built, the emitters draw C integers."""

    def __init__(self, seed: bytes | None = None) -> None:
        data = os.urandom(32) if seed is None else (seed * 32)[:32]
        self.s0 = int.from_bytes(data[0:8], "little")
        self.s1 = int.from_bytes(data[8:16], "little")
        self.s2 = int.from_bytes(data[16:24], "little")
        self.s3 = int.from_bytes(data[24:32], "little")
        if not (self.s0 | self.s1 | self.s2 | self.s3):
            self.s0 = 1  # the one state the generator never leaves

    @cython.locals(result=cython.ulonglong, t=cython.ulonglong)
    def next(self) -> int:
        result = (rotl((self.s1 * 5) & MASK64, 7) * 9) & MASK64
        t = (self.s1 << 17) & MASK64
        self.s2 ^= self.s0
        self.s3 ^= self.s1
        self.s1 ^= self.s2
        self.s0 ^= self.s3
        self.s2 ^= t
        self.s3 = rotl(self.s3, 45)
        return result

    def __call__(self) -> int:
        return self.next()


def random_ids() -> Callable[[], int]:
    """One executor's id generator, no lock shared: built, a :class:`RandomIds` the
    emitters read in C; in the interpreter Python's own generator, which makes an id
    in one call where xoshiro would take a dozen operations on Python ints."""
    if cython.compiled:
        return RandomIds()
    rng = random.Random(int.from_bytes(os.urandom(16), "little"))
    return functools.partial(rng.getrandbits, 64)


# -- what executors and emitters share ------------------------------------------


@cython.final
@cython.cclass
class TaskState:
    """Mutable per-task state the emitters share with their executor: the tuple being
    processed (what auto-anchoring anchors to) and the task's emit count."""

    def __init__(self) -> None:
        self.current = None
        self.emitted = 0


@cython.final
@cython.cclass
class StreamCounts:
    """[emitted, transferred] of one output stream."""

    def __init__(self) -> None:
        self.emitted = 0
        self.transferred = 0

    def __getitem__(self, i: int) -> int:
        return (self.emitted, self.transferred)[i]

    def __setitem__(self, i: int, value: int) -> None:
        if i in (0, -2):
            self.emitted = value
        elif i in (1, -1):
            self.transferred = value
        else:
            raise IndexError(i)

    def __len__(self) -> int:
        return 2

    def __iter__(self) -> Any:
        return iter((self.emitted, self.transferred))


@cython.final
@cython.cclass
class Out:
    """One output stream as the emitters read it."""

    def __init__(self, so: StreamOut) -> None:
        self.record = so.record
        self.nfields = so.nfields
        self.route = so.route
        self.direct = so.direct
        self.fields = so.fields
        self.constant = so.constant
        self.counts = so.counts  # the StreamOut's own: its stats read what the emits count
        memo = getattr(so.route, "memo", None)
        # A one-field fields grouping's tasks of the keys it has seen (its chooser's), or None
        self.memo = memo if type(memo) is dict else None
        self.key_index = getattr(so.route, "key_index", 0)
        self.bare_record = is_values_record(so.record)  # filled as a tuple is, built


def target_of(append: Callable[[Any], None]) -> Any:
    """Where an emit delivers for the executor's ``append``: the list or RemoteBatch whose
    bound ``append`` it is, so that it is filled with no call, else the callable itself."""
    owner = getattr(append, "__self__", None)
    return owner if type(owner) is list or type(owner) is RemoteBatch else append


@cython.cclass
class Emitter:
    """What the bolt's and the spout's emit share: checks, values, route, batches."""

    def __init__(self, component: str, task: int, streams: dict[str, StreamOut],
                 out: dict[int, Callable[[Any], None]], rand64: Callable[[], int], check: Callable,
                 always_check: bool, capture: Callable | None, state: TaskState) -> None:
        self.component = component
        self.task = task
        self.streams = streams
        self.table = {name: Out(so) for name, so in streams.items()}
        self.targets = {t: target_of(a) for t, a in out.items()}
        self.rand64 = rand64
        self.c_ids = type(rand64) is RandomIds
        self.ids = rand64 if self.c_ids else None
        self.check = check
        self.always_check = always_check
        self.capture = capture
        self.state = state
        # msgpack's scalars and the types features register (a TransactionAttempt): values
        # of these need no further check to cross the wire; the registry's own set.
        self.plain = PLAIN_TYPES
        self.vals = self.tasks = None
        # The event logger's sampler of this task (squall.worker.event_log), set and cleared
        # while the worker runs; None (the rule) costs an emit one check.
        self.debug = None

    def new_id(self) -> int:
        if self.c_ids:
            return self.ids.next()
        return self.rand64()

    def put_into(self, target: Any, tup: Any) -> int:
        if type(target) is list or type(target) is RemoteBatch:
            target.append(tup)
        else:
            target(tup)
        return 0

    @cython.locals(o=Out, key=object, tv=object)
    def prepare(self, values: Any, stream: Any, direct_task: Any) -> int:
        """The checks, the values record and the target tasks of an emit, left in
        ``self.vals`` and ``self.tasks``."""
        o = self.table.get(stream)
        if o is None or (type(values) is not list and type(values) is not tuple):
            raise bad_emit(self.component, stream, self.streams, values, direct_task)
        if len(values) != o.nfields or o.direct == (direct_task is None):
            raise bad_emit(self.component, stream, self.streams, values, direct_task)
        if self.always_check:
            self.check(values, o.fields, self.component, stream)
        else:
            plain = self.plain
            for v in values:
                tv = type(v)
                if tv is not str and tv is not float and tv not in plain:
                    self.check(values, o.fields, self.component, stream)
                    break
        if o.bare_record:
            vals = filled_record(o.record, values, o.nfields)
        else:
            vals = tuple.__new__(o.record, values)
        if o.constant is not None:
            tasks = o.constant
        elif o.memo is not None:
            # A fields grouping's known key: its task from the chooser's memo, with no call.
            key = cython.cast(tuple, vals)[o.key_index]
            tasks = o.memo.get(key) if type(key) is str else None
            if tasks is None:
                tasks = o.route(vals, direct_task)
        else:
            tasks = o.route(vals, direct_task)
        if type(tasks) is not tuple:
            tasks = tuple(tasks)
        self.state.emitted += 1
        o.counts.emitted += 1
        o.counts.transferred += len(tasks)
        if self.capture is not None:
            self.capture(self.component, stream, vals)
        self.vals = vals
        self.tasks = tasks
        return 0

    def untracked(self, vals: Any, tasks: tuple, stream: Any) -> int:
        """One tuple without ids, shared by every target task."""
        tup = bare_tuple(None, self.component, stream, self.task, vals)
        for t in tasks:
            target = self.targets[t]
            if type(target) is list:
                target.append(tup)
            else:
                self.put_into(target, tup)
        return 0


@cython.final
@cython.cclass
class BoltEmit(Emitter):
    """A bolt task's emit."""

    def emit(self, values: Any, anchors: Any = None, stream: str = DEFAULT_STREAM,
             direct_task: Any = None) -> Any:
        self.prepare(values, stream, direct_task)
        vals, tasks = self.vals, self.tasks
        self.vals = self.tasks = None  # the emitter keeps no values alive between emits
        if self.debug is not None:
            self.debug(stream, None, vals)  # a bolt's tuple has no message id of its own (Storm's)
        if anchors is None:
            if self.auto_anchor and self.tracking:
                cur = self.state.current
                if cur is not None:
                    if one_tree(cur):  # the common case: one anchor in one tree
                        self.one_tree_children(cur, vals, tasks, stream)
                        return tasks
                    if roots_of(cur):
                        self.anchored(vals, tasks, stream, (cur,))
                        return tasks
            self.untracked(vals, tasks, stream)
            return tasks
        if (type(anchors) is list or type(anchors) is tuple) and len(anchors) == 1:
            anchors = anchors[0]  # one anchor in a list (a multilang emit's): as one given alone
        if type(anchors) is not list and type(anchors) is not tuple:
            if self.tracking and one_tree(anchors):
                self.one_tree_children(anchors, vals, tasks, stream)
                return tasks
            anchors = (anchors,)
        if self.tracking and anchors:
            self.anchored(vals, tasks, stream, anchors)
        else:
            self.untracked(vals, tasks, stream)
        return tasks

    @cython.locals(root=cython.ulonglong, e=cython.ulonglong, batch=RemoteBatch)
    def one_tree_children(self, a: Any, vals: Any, tasks: tuple, stream: Any) -> int:
        """A child per task anchored to ``a``, of one tree: its own edge, XOR-ed into ``a``."""
        root = root_of(a)
        for t in tasks:
            e = self.new_id()
            add_ack(a, e)
            target = self.targets[t]
            if type(target) is list:
                target.append(tree_tuple(self.component, stream, self.task, vals, root, e))
            elif type(target) is RemoteBatch:
                batch = target
                # Packed for the other worker as it is, with no Tuple made, unless it cannot be
                if batch.put_tree(e, self.task, stream, vals, root):
                    batch.append(tree_tuple(self.component, stream, self.task, vals, root, e))
            else:
                self.put_into(target, tree_tuple(self.component, stream, self.task, vals, root, e))
        return 0

    @cython.locals(e=cython.ulonglong)
    def anchored(self, vals: Any, tasks: tuple, stream: Any, anchors: Any) -> int:
        """Every (child, anchor) pair its own edge, each of the anchor's roots XOR-ed with it."""
        for t in tasks:
            amap = None
            first = None
            for anchor in anchors:
                am = roots_of(anchor)
                if am:
                    e = self.new_id()
                    add_ack(anchor, e)
                    edge = e  # (built: the one int made for this edge)
                    if amap is None:
                        amap = dict.fromkeys(am, edge)
                        first = edge
                    else:
                        for root in am:
                            amap[root] = amap.get(root, 0) ^ edge
            tup = bare_tuple(first, self.component, stream, self.task, vals)
            set_anchors(tup, amap)
            self.put_into(self.targets[t], tup)
        return 0


def bolt_emitter(component: str, task: int, streams: dict[str, StreamOut],
                 out: dict[int, Callable[[Any], None]], tracking: bool, rand64: Callable[[], int],
                 check: Callable, always_check: bool, capture: Callable | None, auto_anchor: bool,
                 state: TaskState) -> Callable:
    """A bolt task's ``emit(values, anchors=None, stream="default", direct_task=None)``."""
    emitter = BoltEmit(component, task, streams, out, rand64, check, always_check, capture, state)
    emitter.tracking = tracking
    emitter.auto_anchor = auto_anchor
    return emitter.emit  # a bound method: called with no tuple or dict made for its arguments


class SpoutTracker:
    """A spout executor's pending trees: root id -> (task, message id, emit time)."""

    __slots__ = ("acker_tasks", "count", "immediate", "inits", "local_ackers", "pending")

    def __init__(self, acker_tasks: list[int], local_tasks: Collection[int] = ()) -> None:
        self.pending = PendingTrees()
        self.count = 0
        self.acker_tasks = acker_tasks
        # Indices (into acker_tasks) of the ackers in this worker: see SpoutEmit.new_root.
        self.local_ackers = [i for i, t in enumerate(acker_tasks) if t in local_tasks]
        self.inits: dict[int, list[tuple[int, int, int]]] = {t: [] for t in acker_tasks}
        # Message ids to ack at once: no ackers, or emitted to no task at all.
        self.immediate: list[tuple[int, Any]] = []


@cython.final
@cython.cclass
class SpoutEmit(Emitter):
    """A spout task's emit: new trees, their inits for the ackers, the pending trees."""

    @cython.locals(root=cython.ulonglong, val=cython.ulonglong, e=cython.ulonglong)
    def emit(self, values: Any, tup_id: Any = None, stream: str = DEFAULT_STREAM,
             direct_task: Any = None) -> Any:
        self.prepare(values, stream, direct_task)
        vals, tasks = self.vals, self.tasks
        self.vals = self.tasks = None  # the emitter keeps no values alive between emits
        if self.debug is not None:
            self.debug(stream, tup_id, vals)
        if tup_id is None or not self.n_ackers or not tasks:
            self.untracked(vals, tasks, stream)
            if tup_id is not None:
                self.immediate.append((self.task, tup_id))
            return tasks
        root = self.new_root()
        val = 0
        for t in tasks:
            e = self.new_id()
            val ^= e
            target = self.targets[t]
            if type(target) is list:
                target.append(tree_tuple(self.component, stream, self.task, vals, root, e))
            else:
                self.put_into(target, tree_tuple(self.component, stream, self.task, vals, root, e))
        self.inits[self.acker_tasks[root % self.n_ackers]].append((root, val, self.task))
        self.pending.add(root, self.task, tup_id, self.now())
        self.tracker.count += 1
        return tasks

    @cython.locals(root=cython.ulonglong, n=cython.ulonglong, base=cython.ulonglong,
                   choice=cython.ulonglong)
    def new_root(self) -> int:
        """A random root whose acker (``root mod n_ackers``) is in this worker when one is.

        A tree's acker is chosen by its root id, so choosing the root's residue
        keeps the spout's init and the acker's ack or fail inside the worker (and,
        for a tree no bolt of another worker touches, every ack of it).  Only
        log2(n_ackers) bits of the root are chosen; the rest stay random.
        """
        root = self.new_id()
        if self.n_local == 0 or self.n_local == self.n_ackers:
            return root
        self.turn += 1
        choice = self.local[self.turn % self.n_local]
        n = self.n_ackers
        base = root - root % n
        if base >= self.top - choice:
            return base - n + choice
        return base + choice


def spout_emitter(component: str, task: int, streams: dict[str, StreamOut],
                  out: dict[int, Callable[[Any], None]], rand64: Callable[[], int], check: Callable,
                  always_check: bool, capture: Callable | None, tracker: SpoutTracker,
                  now: Callable[[], float], state: TaskState) -> Callable:
    """A spout task's ``emit(values, tup_id=None, stream="default", direct_task=None)``."""
    emitter = SpoutEmit(component, task, streams, out, rand64, check, always_check, capture, state)
    emitter.tracker = tracker
    emitter.now = now
    emitter.inits = tracker.inits
    emitter.immediate = tracker.immediate
    emitter.pending = tracker.pending
    emitter.acker_tasks = tracker.acker_tasks
    emitter.n_ackers = len(tracker.acker_tasks)
    emitter.local = tuple(tracker.local_ackers)
    emitter.n_local = len(emitter.local)
    emitter.turn = 0
    emitter.top = MASK64 - emitter.n_ackers + 1 if emitter.n_ackers else 0  # 2**64 - n_ackers
    return emitter.emit  # (see bolt_emitter)
