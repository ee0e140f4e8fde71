# cython: language_level=3, boundscheck=False, wraparound=False
"""The emit and ack of one tuple, typed: the pure-Python twin is ``squall.worker.executors.emit``
(emitters, task state, counters, ids) and ``BoltExecutor.on_data`` (the acking loop).

Compiled plain Python still makes and frees a Python object for every number
acking needs: an edge id, the anchor's XOR, a ``{root: edge}`` map per tuple,
an int per root and sum in the bolt's acks.  Here they are C integers:

- edge and root ids come from a xoshiro256** generator per executor
  (:class:`RandomIds`), seeded from ``os.urandom``: random ids, as Storm's odds
  of a false completion need, at a few nanoseconds each, never a Python int;
- a tuple of one tree (nearly every tuple) is a typed Tuple with its root and
  edge inline (squall/topology/tuple.py, typed by tuple.pxd), from a free list;
- the anchor's ack value is XOR-ed in C;
- a bolt's acks of one batch are summed per root in :class:`AckTable`, an
  open-addressing table of C integers, and leave it as (root, value) pairs
  once per batch, for the acker.

Everything else (checks, routers, the user's calls) is the twin's, in the same
order with the same errors; tests/worker/test_typed_core.py runs both on the
same inputs.  Built by ``python -m squall.compiled build``; without the build
the twin runs.
"""

import os

# Ids leave ints through PyLong_AsUnsignedLong (64 bits on LP64): 3.11's PyLong_AsUnsignedLongLong
# converts a multi-digit int byte by byte (_PyLong_AsByteArray).
from cpython.long cimport PyLong_AsUnsignedLong, PyLong_FromUnsignedLongLong
from cpython.mem cimport PyMem_Calloc, PyMem_Free
from libc.stdint cimport uint64_t

from squall.acker.ledger cimport PAIR_BYTES, put_le64
from squall.topology.tuple cimport (
    ONE_ROOT,
    ROOT_MAP,
    Tuple,
    anchors_of,
    bare_tuple,
    filled_record,
    is_values_record,
    set_anchors,
)

from squall.worker.wire.fastwire cimport RemoteBatch
from squall.worker.executors.pending cimport PendingTrees

from squall.topology.component import DEFAULT_STREAM
from squall.worker.executors.emit_errors import bad_emit
from squall.worker.wire.value_types import PLAIN_TYPES

cdef extern from "Python.h":
    ctypedef struct PyObject
    PyObject* PyList_GET_ITEM(object o, Py_ssize_t i)
    int PyList_Append(object l, object x) except -1
    object PyBytes_FromStringAndSize(const char* s, Py_ssize_t n)
    char* PyBytes_AS_STRING(object b)


# -- ids -----------------------------------------------------------------------

cdef inline uint64_t rotl(uint64_t x, int k):
    return (x << k) | (x >> (64 - k))


cdef class RandomIds:
    """Random 64-bit ids: call it for an int; the emitters draw C integers."""

    cdef uint64_t s[4]

    def __cinit__(self, bytes seed=None):
        cdef bytes data = os.urandom(32) if seed is None else (seed * 32)[:32]
        cdef int i
        for i in range(4):
            self.s[i] = int.from_bytes(data[8 * i:8 * i + 8], "little")
        if not (self.s[0] | self.s[1] | self.s[2] | self.s[3]):
            self.s[0] = 1  # the one state the generator never leaves

    cdef inline uint64_t next(self):
        cdef uint64_t result = rotl(self.s[1] * 5, 7) * 9
        cdef uint64_t t = self.s[1] << 17
        self.s[2] ^= self.s[0]
        self.s[3] ^= self.s[1]
        self.s[1] ^= self.s[2]
        self.s[0] ^= self.s[3]
        self.s[2] ^= t
        self.s[3] = rotl(self.s[3], 45)
        return result

    def __call__(self):
        return PyLong_FromUnsignedLongLong(self.next())


# -- what executors and emitters share ------------------------------------------

cdef class TaskState:
    """Mutable per-task state the emitters share with their executor (as the twin's)."""

    cdef public object current
    cdef public long long emitted

    def __init__(self):
        self.current = None
        self.emitted = 0


cdef class StreamCounts:
    """[emitted, transferred] of one output stream, as the twin's list reads."""

    cdef public long long emitted, transferred

    def __getitem__(self, Py_ssize_t i):
        if i == 0 or i == -2:
            return self.emitted
        if i == 1 or i == -1:
            return self.transferred
        raise IndexError(i)

    def __setitem__(self, Py_ssize_t i, long long value):
        if i == 0 or i == -2:
            self.emitted = value
        elif i == 1 or i == -1:
            self.transferred = value
        else:
            raise IndexError(i)

    def __len__(self):
        return 2

    def __iter__(self):
        return iter((self.emitted, self.transferred))


cdef class Out:
    """One output stream as the emitters read it (``StreamOut.unpacked`` in C)."""

    cdef object record, route, fields, constant
    cdef Py_ssize_t nfields, key_index
    cdef bint direct, bare_record  # bare_record: filled as a tuple is (is_values_record)
    cdef dict memo  # a one-field fields grouping's tasks of the keys it has seen, or None
    cdef StreamCounts counts

    def __init__(self, unpacked):
        record, nfields, route, direct, fields, constant, counts = unpacked
        self.record = record
        self.nfields = nfields
        self.route = route
        self.direct = direct
        self.fields = fields
        self.constant = constant
        self.counts = counts  # the StreamOut's own: its stats read what the emits count
        memo = getattr(route, "memo", None)
        self.memo = memo if type(memo) is dict else None
        self.key_index = getattr(route, "key_index", 0)
        self.bare_record = is_values_record(record)


cdef inline object make_values(Out o, object values):
    """``tuple.__new__(record, values)``, without the call where the record allows."""
    if o.bare_record:
        return filled_record(<type>o.record, values, o.nfields)
    return tuple.__new__(o.record, values)


cdef inline Tuple tree_tuple(object component, object stream, object task, object vals, uint64_t root,
                             uint64_t edge):
    """A tuple of one tree: its id is its edge."""
    cdef Tuple t = bare_tuple(None, component, stream, task, vals)
    t.id_is_edge = True
    t.form = ONE_ROOT
    t.root = root
    t.edge = edge
    return t


cdef object _target_of(append):
    """Where an emit delivers for the executor's ``append``: the list or RemoteBatch whose
    bound ``append`` it is, so that it is filled in C, else the callable itself."""
    owner = getattr(append, "__self__", None)
    return owner if type(owner) is list or type(owner) is RemoteBatch else append


cdef class Emitter:
    """What the bolt's and the spout's emit share: checks, values, route, batches."""

    cdef object component, task, streams, check, capture, rand64
    cdef object vals, tasks  # what prepare() found, for the emit that called it
    cdef dict table, targets
    cdef bint always_check, c_ids
    cdef RandomIds ids
    cdef TaskState state
    cdef object plain

    def __init__(self, component, task, streams, out, rand64, check, always_check, capture, state):
        self.component = component
        self.task = task
        self.streams = streams
        self.table = {name: Out(so.unpacked()) for name, so in streams.items()}
        self.targets = {t: _target_of(a) for t, a in out.items()}
        self.rand64 = rand64
        self.c_ids = type(rand64) is RandomIds
        self.ids = rand64 if self.c_ids else None
        self.check = check
        self.always_check = always_check
        self.capture = capture
        self.state = state
        self.plain = PLAIN_TYPES

    cdef inline uint64_t new_id(self) except? 0:
        if self.c_ids:
            return self.ids.next()
        return PyLong_AsUnsignedLong(self.rand64())

    cdef inline int deliver(self, object t, object tup) except -1:
        return self.put_into(self.targets[t], tup)

    cdef inline int put_into(self, object target, object tup) except -1:
        if type(target) is list:
            return PyList_Append(target, tup)
        if type(target) is RemoteBatch:
            target.append(tup)
        else:
            target(tup)
        return 0

    cdef int prepare(self, object values, object stream, object direct_task) except -1:
        """The checks, the values record and the target tasks of an emit (the twin's order),
        left in ``self.vals`` and ``self.tasks``."""
        so = self.table.get(stream)
        if so is None or (type(values) is not list and type(values) is not tuple):
            raise self.bad(values, stream, direct_task)
        cdef Out o = <Out>so
        if len(values) != o.nfields or o.direct == (direct_task is None):
            raise self.bad(values, stream, direct_task)
        if self.always_check:
            self.check(values, o.fields, self.component, stream)
        else:
            plain = self.plain
            for v in values:
                tv = type(v)
                if tv is not str and tv is not float and tv not in plain:
                    self.check(values, o.fields, self.component, stream)
                    break
        vals = make_values(o, values)
        if o.constant is not None:
            tasks = o.constant
        elif o.memo is not None:
            # A fields grouping's known key: its task from the chooser's memo, with no call.
            key = (<tuple>vals)[o.key_index]
            tasks = o.memo.get(key) if type(key) is str else None
            if tasks is None:
                tasks = o.route(vals, direct_task)
        else:
            tasks = o.route(vals, direct_task)
        if type(tasks) is not tuple:
            tasks = tuple(tasks)
        self.state.emitted += 1
        o.counts.emitted += 1
        o.counts.transferred += len(<tuple>tasks)
        if self.capture is not None:
            self.capture(self.component, stream, vals)
        self.vals = vals
        self.tasks = tasks
        return 0

    cdef object bad(self, values, stream, direct_task):
        return bad_emit(self.component, stream, self.streams, values, direct_task)


cdef class BoltEmit(Emitter):
    """A bolt task's emit (collector.bolt_emitter's twin)."""

    cdef bint tracking, auto_anchor

    def emit(self, values, anchors=None, stream=DEFAULT_STREAM, direct_task=None):
        cdef Tuple a
        self.prepare(values, stream, direct_task)
        vals, tasks = self.vals, self.tasks
        self.vals = self.tasks = None  # the emitter keeps no values alive between emits
        if anchors is None:
            if self.auto_anchor and self.tracking:
                cur = self.state.current
                if type(cur) is Tuple:
                    a = <Tuple>cur
                    if a.form == ONE_ROOT:  # the common case: one anchor in one tree
                        self.one_tree(a, vals, tasks, stream)
                        return tasks
                    if a.form == ROOT_MAP and a.amap:
                        self.anchored(vals, tasks, stream, (a,))
                        return tasks
                elif cur is not None and cur.anchors:
                    self.anchored(vals, tasks, stream, (cur,))
                    return tasks
            self.untracked(vals, tasks, stream)
            return tasks
        if ((type(anchors) is list or type(anchors) is tuple) and len(anchors) == 1
                and type(anchors[0]) is Tuple):
            anchors = anchors[0]  # one anchor in a list (a multilang emit's): as one given alone
        if type(anchors) is Tuple:
            a = <Tuple>anchors
            if self.tracking and a.form == ONE_ROOT:
                self.one_tree(a, vals, tasks, stream)
                return tasks
            anchors = (anchors,)
        if self.tracking and anchors:
            self.anchored(vals, tasks, stream, anchors)
        else:
            self.untracked(vals, tasks, stream)
        return tasks

    cdef int one_tree(self, Tuple a, vals, tuple tasks, stream) except -1:
        """A child per task anchored to ``a``, of one tree: its own edge, XOR-ed into ``a``."""
        cdef uint64_t e
        for t in tasks:
            e = self.new_id()
            a.ack ^= e
            target = self.targets[t]
            if type(target) is list:
                PyList_Append(target, tree_tuple(self.component, stream, self.task, vals, a.root, e))
            elif type(target) is RemoteBatch and not (<RemoteBatch>target).put_tree(e, self.task, stream, vals,
                                                                                    a.root):
                pass  # packed for the other worker as it is, with no Tuple made
            else:
                self.put_into(target, tree_tuple(self.component, stream, self.task, vals, a.root, e))
        return 0

    cdef int untracked(self, vals, tuple tasks, stream) except -1:
        tup = bare_tuple(None, self.component, stream, self.task, vals)
        for t in tasks:
            self.deliver(t, tup)
        return 0

    cdef int anchored(self, vals, tuple tasks, stream, anchors) except -1:
        """Every (child, anchor) pair its own edge, each of the anchor's roots XOR-ed with it."""
        cdef uint64_t e
        cdef Tuple a
        cdef Tuple tup
        for t in tasks:
            amap = None
            first = None
            for anchor in anchors:
                am = anchors_of(<Tuple>anchor) if type(anchor) is Tuple else anchor.anchors
                if am:
                    e = self.new_id()
                    if type(anchor) is Tuple:
                        a = <Tuple>anchor
                        a.ack ^= e
                    else:
                        anchor.ackval ^= e
                    edge = PyLong_FromUnsignedLongLong(e)
                    if amap is None:
                        amap = dict.fromkeys(am, edge)
                        first = edge
                    else:
                        for root in am:
                            amap[root] = amap.get(root, 0) ^ edge
            tup = bare_tuple(None, self.component, stream, self.task, vals)
            tup.tid = first
            set_anchors(tup, amap)
            self.deliver(t, tup)
        return 0


cdef class SpoutEmit(Emitter):
    """A spout task's emit (collector.spout_emitter's twin): new trees, their inits, pending."""

    cdef object tracker, now, inits, immediate, pending, acker_tasks
    cdef Py_ssize_t n_ackers, n_local, turn
    cdef tuple local
    cdef uint64_t top

    def emit(self, values, tup_id=None, stream=DEFAULT_STREAM, direct_task=None):
        cdef uint64_t root, val, e
        self.prepare(values, stream, direct_task)
        vals, tasks = self.vals, self.tasks
        self.vals = self.tasks = None  # the emitter keeps no values alive between emits
        if tup_id is None or not self.n_ackers or not tasks:
            tup = bare_tuple(None, self.component, stream, self.task, vals)
            for t in <tuple>tasks:
                self.deliver(t, tup)
            if tup_id is not None:
                self.immediate.append((self.task, tup_id))
            return tasks
        root = self.new_root()
        val = 0
        for t in <tuple>tasks:
            e = self.new_id()
            val ^= e
            self.deliver(t, tree_tuple(self.component, stream, self.task, vals, root, e))
        r = PyLong_FromUnsignedLongLong(root)
        self.inits[self.acker_tasks[root % <uint64_t>self.n_ackers]].append(
            (r, PyLong_FromUnsignedLongLong(val), self.task))
        if type(self.pending) is PendingTrees:  # the typed table: no tuple made for the entry
            (<PendingTrees>self.pending).add(root, self.task, tup_id, self.now())
        else:
            self.pending.put_new(r, (self.task, tup_id, self.now()))
        self.tracker.count += 1
        return tasks

    cdef inline uint64_t new_root(self) except? 0:
        """collector.new_roots in C: a random root whose acker is in this worker when one is."""
        cdef uint64_t root = self.new_id()
        cdef uint64_t n = <uint64_t>self.n_ackers
        cdef uint64_t base, choice
        if self.n_local == 0 or self.n_local == self.n_ackers:
            return root
        self.turn += 1
        choice = <uint64_t>self.local[self.turn % self.n_local]
        base = root - root % n
        if base >= self.top - choice:
            return base - n + choice
        return base + choice


def bolt_emitter(component, task, streams, out, tracking, rand64, check, always_check, capture, auto_anchor,
                 state):
    """collector.bolt_emitter, typed: the same arguments, the same emit."""
    emit = BoltEmit(component, task, streams, out, rand64, check, always_check, capture, state)
    emit.tracking = tracking
    emit.auto_anchor = auto_anchor
    return emit.emit  # a bound method: called with no tuple or dict made for its arguments


def spout_emitter(component, task, streams, out, rand64, check, always_check, capture, tracker, now, state):
    """collector.spout_emitter, typed: the same arguments, the same emit."""
    emit = SpoutEmit(component, task, streams, out, rand64, check, always_check, capture, state)
    emit.tracker = tracker
    emit.now = now
    emit.inits = tracker.inits
    emit.immediate = tracker.immediate
    emit.pending = tracker.pending
    emit.acker_tasks = tracker.acker_tasks
    emit.n_ackers = len(tracker.acker_tasks)
    emit.local = tuple(tracker.local_ackers)
    emit.n_local = len(emit.local)
    emit.turn = 0
    emit.top = <uint64_t>(-1) - <uint64_t>emit.n_ackers + 1 if emit.n_ackers else 0
    return emit.emit  # (see bolt_emitter)


# -- a bolt's acks ---------------------------------------------------------------

cdef enum:
    TABLE_START = 64  # slots of a new table's index; it doubles as a turn's roots grow


cdef class AckTable:
    """One turn's acks of a bolt executor, XOR-ed per root (collector.AckTable's twin).

    The roots and their sums are kept in arrays in the order they came, with an
    open-addressing index over them (the roots are random: their low bits are
    the hash); :meth:`drain` hands them to the acker as (root, value) pairs and
    empties the table for the next turn without freeing it.
    """

    cdef uint64_t* roots
    cdef uint64_t* vals
    cdef Py_ssize_t* index  # slot -> position in roots/vals, or -1
    cdef Py_ssize_t n, cap  # entries; index slots (a power of two, at least twice n)

    def __cinit__(self):
        self.n = 0
        self.cap = 0
        self.roots = self.vals = NULL
        self.index = NULL
        self.grow(TABLE_START)

    def __dealloc__(self):
        PyMem_Free(self.roots)
        PyMem_Free(self.vals)
        PyMem_Free(self.index)

    cdef int grow(self, Py_ssize_t cap) except -1:
        cdef Py_ssize_t i, slot, mask = cap - 1
        cdef uint64_t* roots = <uint64_t*>PyMem_Calloc(cap // 2, sizeof(uint64_t))
        cdef uint64_t* vals = <uint64_t*>PyMem_Calloc(cap // 2, sizeof(uint64_t))
        cdef Py_ssize_t* index = <Py_ssize_t*>PyMem_Calloc(cap, sizeof(Py_ssize_t))
        if roots == NULL or vals == NULL or index == NULL:
            PyMem_Free(roots)
            PyMem_Free(vals)
            PyMem_Free(index)
            raise MemoryError()
        for i in range(cap):
            index[i] = -1
        for i in range(self.n):
            roots[i] = self.roots[i]
            vals[i] = self.vals[i]
            slot = <Py_ssize_t>(roots[i] & <uint64_t>mask)
            while index[slot] != -1:
                slot = (slot + 1) & mask
            index[slot] = i
        PyMem_Free(self.roots)
        PyMem_Free(self.vals)
        PyMem_Free(self.index)
        self.roots, self.vals, self.index, self.cap = roots, vals, index, cap
        return 0

    cdef inline int put(self, uint64_t root, uint64_t val) except -1:
        cdef Py_ssize_t mask = self.cap - 1
        cdef Py_ssize_t slot = <Py_ssize_t>(root & <uint64_t>mask)
        cdef Py_ssize_t at
        while True:
            at = self.index[slot]
            if at == -1:
                break
            if self.roots[at] == root:
                self.vals[at] ^= val
                return 0
            slot = (slot + 1) & mask
        if 2 * (self.n + 1) > self.cap:
            self.grow(2 * self.cap)
            return self.put(root, val)
        self.index[slot] = self.n
        self.roots[self.n] = root
        self.vals[self.n] = val
        self.n += 1
        return 0

    cdef int put_tuple(self, object tup) except -1:
        cdef Tuple t
        cdef uint64_t ack
        if type(tup) is Tuple:
            t = <Tuple>tup
            if t.form == ONE_ROOT:
                return self.put(t.root, t.edge ^ t.ack)
            am = t.amap
            ack = t.ack
        else:
            am = tup.anchors
            ack = PyLong_AsUnsignedLong(tup.ackval)
        if am:
            for root, edge in am.items():
                self.put(PyLong_AsUnsignedLong(root), PyLong_AsUnsignedLong(edge) ^ ack)
        return 0

    def xor(self, root, val):
        """XOR ``val`` into ``root``'s sum."""
        self.put(PyLong_AsUnsignedLong(root), PyLong_AsUnsignedLong(val))

    def add(self, tup):
        """A tuple's ack: its edge XOR the edges anchored to it, into each of its roots."""
        self.put_tuple(tup)

    def __len__(self):
        return self.n

    def drain(self):
        """The (root, value) pairs in the order their roots came; the table is left empty."""
        cdef Py_ssize_t i
        out = [(PyLong_FromUnsignedLongLong(self.roots[i]), PyLong_FromUnsignedLongLong(self.vals[i]))
               for i in range(self.n)]
        self.clear()
        return out

    def drain_by(self, Py_ssize_t ackers):
        """The pairs of :meth:`drain`, packed (squall.acker.ledger.PACKED_ACK) one bytes per
        acker: the acker of a root is ``root % ackers`` (the spout chose the root so); the
        table is left empty.  No tuple or int is made for a pair."""
        cdef Py_ssize_t i, a
        cdef char* p
        if ackers < 1:
            raise ValueError(f"ackers must be at least 1, not {ackers}")
        # Each acker's bytes: first its size, then how much of it is written
        cdef Py_ssize_t* filled = <Py_ssize_t*>PyMem_Calloc(ackers, sizeof(Py_ssize_t))
        if filled == NULL:
            raise MemoryError()
        try:
            for i in range(self.n):
                filled[self.roots[i] % <uint64_t>ackers] += PAIR_BYTES
            out = [PyBytes_FromStringAndSize(NULL, filled[a]) for a in range(ackers)]
            for a in range(ackers):
                filled[a] = 0
            for i in range(self.n):
                a = <Py_ssize_t>(self.roots[i] % <uint64_t>ackers)
                p = PyBytes_AS_STRING(<object>PyList_GET_ITEM(out, a)) + filled[a]
                put_le64(p, self.roots[i])
                put_le64(p + 8, self.vals[i])
                filled[a] += PAIR_BYTES
        finally:
            PyMem_Free(filled)
        self.clear()
        return out

    cdef void clear(self):
        cdef Py_ssize_t i
        for i in range(self.cap):
            self.index[i] = -1
        self.n = 0


def run_batch(executor, bt, list tuples, process, TaskState state, AckTable acks, bint current,
              Py_ssize_t check_every):
    """BoltExecutor.on_data's loop, typed: each tuple processed, then (with ``acks``) its
    ack folded in; ``current``: each is the state's current tuple while it runs (what
    auto-anchoring reads).  A tuple whose process raised goes to the executor's error
    path, unacked.  Stops early (the rest times out and replays) once the executor is
    told to stop, looking every ``check_every`` tuples.  Returns how many raised."""
    cdef Py_ssize_t i, n = len(tuples), errors = 0
    for i in range(n):
        if i % check_every == 0 and not executor.running:
            break
        tup = <object>PyList_GET_ITEM(tuples, i)
        if current:
            state.current = tup
        try:
            process(tup)
        except Exception as e:  # user code: fail the tuple, keep going
            executor.on_process_error(bt, tup, e)
            errors += 1
            continue
        if acks is not None:
            acks.put_tuple(tup)
    return errors
