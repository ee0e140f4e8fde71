"""Groupings at run time: each chooser maps an emitted tuple to target tasks.

One chooser per (emitting task, subscriber); a stream's router concatenates
its subscribers' choices.  Choosers return lists that callers must not mutate.
Fields groupings hash the *values* with CRC-32 so that every process agrees
(Python's ``hash()`` of a str is salted per process).
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import msgpack

from squall.topology.grouping import CustomGrouping, GroupingSpec
from squall.worker.wire.codec import pack_ext

Choose = Callable[[Any, Any], Sequence[int]]
# Choosers return tuples: shared, so they must be immutable, and emit hands
# them back to the user as the list of tasks the tuple went to.  A chooser
# whose answer never varies carries it as ``.constant``; emit then skips the call.


def _constant(tasks: tuple[int, ...]) -> Choose:
    def choose(values: Any, direct: Any) -> Sequence[int]:
        return tasks

    choose.constant = tasks  # type: ignore[attr-defined]
    return choose


def stable_hash(key: Any, seed: int = 0) -> int:
    """A hash of a value, or a tuple of values, equal in every process."""
    if type(key) is str:
        return zlib.crc32(key.encode("utf-8", "surrogatepass"), seed)
    if type(key) is int and 0 <= key < 1 << 63:
        # Fibonacci hashing: spreads keys with regular gaps (all even ids, say).
        return (((key ^ seed) * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF) >> 32
    if type(key) is bytes:
        return zlib.crc32(key, seed)
    # pack_ext: a grouping on a transactional topology's attempt field.
    return zlib.crc32(msgpack.packb(key, use_bin_type=True, default=pack_ext), seed)


def _key_fn(indices: Sequence[int]) -> Callable[[Any], Any]:
    if len(indices) == 1:
        i = indices[0]
        return lambda values: values[i]
    idx = tuple(indices)
    return lambda values: [values[i] for i in idx]


def shuffle(tasks: Sequence[int]) -> Choose:
    # Round robin over a shuffled order: even spread without a random draw per tuple.
    order = [(t,) for t in tasks]
    random.shuffle(order)
    n = len(order)
    if n == 1:
        return _constant(order[0])
    pos = random.randrange(n)

    def choose(values: Any, direct: Any) -> Sequence[int]:
        nonlocal pos
        pos += 1
        if pos >= n:
            pos = 0
        return order[pos]

    return choose


FIELDS_MEMO_SIZE = 1 << 16  # distinct keys remembered per chooser before the memo starts over


def fields(tasks: Sequence[int], indices: Sequence[int]) -> Choose:
    targets = [(t,) for t in sorted(tasks)]
    n = len(targets)
    if n == 1:
        return _constant(targets[0])
    if len(indices) != 1:
        key = _key_fn(indices)
        return lambda values, direct: targets[stable_hash(key(values)) % n]
    # One grouping field (the common case): the chosen task of a key is memoized.  Keys
    # repeat (words, user ids), and a dict lookup of a str, whose hash Python caches, is
    # a fraction of encoding and CRC-ing it again; the memo starts over when it is full.
    i = indices[0]
    memo: dict[Any, tuple[int, ...]] = {}

    def choose(values: Any, direct: Any) -> Sequence[int]:
        k = values[i]
        if type(k) is not str:
            return targets[stable_hash(k) % n]
        target = memo.get(k)
        if target is None:
            if len(memo) >= FIELDS_MEMO_SIZE:
                memo.clear()
            target = memo[k] = targets[stable_hash(k) % n]
        return target

    # What the typed emitters read to find a known key's task without calling choose.
    choose.memo = memo  # type: ignore[attr-defined]
    choose.key_index = i  # type: ignore[attr-defined]
    return choose


def partial_key(tasks: Sequence[int], indices: Sequence[int]) -> Choose:
    """Storm's PartialKeyGrouping: two candidate tasks per key, the less loaded wins."""
    targets = sorted(tasks)
    n = len(targets)
    load = [0] * n
    key = _key_fn(indices)

    def choose(values: Any, direct: Any) -> Sequence[int]:
        k = key(values)
        a = stable_hash(k) % n
        b = stable_hash(k, 0x9E3779B9) % n
        pick = a if load[a] <= load[b] else b
        load[pick] += 1
        return (targets[pick],)

    return choose


def all_tasks(tasks: Sequence[int]) -> Choose:
    return _constant(tuple(sorted(tasks)))


def global_(tasks: Sequence[int]) -> Choose:
    return _constant((min(tasks),))


def direct(tasks: Sequence[int]) -> Choose:
    valid = {t: (t,) for t in tasks}

    def choose(values: Any, direct_task: Any) -> Sequence[int]:
        return valid.get(direct_task, ())

    return choose


LOAD_CHECK_EVERY = 256  # choices between two looks at the local tasks' load


def load_aware_shuffle(tasks: Sequence[int], local_tasks: set[int], load_of: Callable[[int], float],
                       higher: float, lower: float) -> Choose:
    """Storm 2's shuffle: the emitting worker's own tasks while they keep up, else every task.

    A tuple that stays in its worker costs no serialization and no thread
    hand-off through the transfer layer, which in Python is most of a
    cross-worker hop.  ``load_of`` is a local task's load, 0..1 (Worker.load_of:
    queue fill or CPU share); when the local tasks' mean load passes ``higher``
    the scope widens to every task, and narrows back once it falls under
    ``lower`` (Storm's topology.localityaware bounds), so a busy worker still
    sheds work.
    """
    near = [t for t in tasks if t in local_tasks]
    if not near or len(near) == len(tasks):
        return shuffle(tasks)
    narrow = shuffle(near)
    wide = shuffle(tasks)
    n = len(near)
    seen = 0
    widened = False

    def choose(values: Any, direct: Any) -> Sequence[int]:
        nonlocal seen, widened
        seen += 1
        if seen >= LOAD_CHECK_EVERY:
            seen = 0
            load = sum(load_of(t) for t in near) / n
            widened = load > lower if widened else load > higher
        return wide(values, direct) if widened else narrow(values, direct)

    return choose


def local_or_shuffle(tasks: Sequence[int], local_tasks: set[int]) -> Choose:
    near = [t for t in tasks if t in local_tasks]
    return shuffle(near or list(tasks))


def custom(grouping: CustomGrouping, src_task: int, tasks: Sequence[int]) -> Choose:
    valid = frozenset(tasks)

    def choose(values: Any, direct_task: Any) -> Sequence[int]:
        chosen = tuple(grouping.choose_tasks(src_task, values))
        if not valid.issuperset(chosen):
            msg = (f"custom grouping {type(grouping).__name__} chose tasks {list(chosen)}, "
                   f"not all among its targets {sorted(valid)}")
            raise ValueError(msg)
        return chosen

    return choose


def make_chooser(
    spec: GroupingSpec,
    tasks: Sequence[int],
    indices: Sequence[int],
    local_tasks: set[int],
    custom_instance: CustomGrouping | None,
    src_task: int,
    load: tuple[Callable[[int], float], float, float] | None = None,
) -> Choose:
    """``load``: (a local task's load, higher bound, lower bound) makes shuffle load-aware."""
    kind = spec.type
    if kind == "shuffle" and load is not None:
        return load_aware_shuffle(tasks, local_tasks, *load)
    if kind in ("shuffle", "none"):
        return shuffle(tasks)
    if kind == "fields":
        return fields(tasks, indices)
    if kind == "partial_key":
        return partial_key(tasks, indices)
    if kind == "all":
        return all_tasks(tasks)
    if kind == "global":
        return global_(tasks)
    if kind == "direct":
        return direct(tasks)
    if kind == "local_or_shuffle":
        return local_or_shuffle(tasks, local_tasks)
    if kind == "custom" and custom_instance is not None:
        return custom(custom_instance, src_task, tasks)
    msg = f"unknown grouping {kind!r}"
    raise ValueError(msg)


def combine(choosers: list[Choose]) -> Choose:
    """A stream's router: every subscriber's choice, concatenated."""
    if not choosers:
        return _constant(())
    if len(choosers) == 1:
        return choosers[0]

    def route(values: Any, direct_task: Any) -> Sequence[int]:
        out: list[int] = []
        for choose in choosers:
            out += choose(values, direct_task)
        return tuple(out)

    return route
