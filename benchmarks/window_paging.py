"""A persisted window's checkpoint cost, unbounded vs max_events_in_memory (pure core,
MemoryStore): fill a count window, checkpoint, add 100 tuples, time the next checkpoint.

    PYTHONPATH=. .venv/bin/python benchmarks/window_paging.py
"""

import json
import time

from squall.state.store import MemoryStore
from squall.topology.tuple import Tuple, record_type
from squall.windowing import Count, WindowCore
from squall.windowing.paged import PagedTuples
from squall.windowing.persist import CODEC, snapshot
from squall.windowing.policy import make_policy

N = record_type(("n",))
print("| window | bound | add µs/tuple | checkpoint ms | checkpoint KiB | tuples in memory |")
print("|---|---|---|---|---|---|")
for size in (10_000, 100_000):
    for bound in (None, 1000):
        core = WindowCore(make_policy("b", tumbling=Count(10 * size)), [("s", "default")])
        if bound:
            core.tuples = PagedTuples(MemoryStore(), "p", bound, CODEC)
        t0 = time.perf_counter()
        for n in range(size):
            core.add(Tuple(None, "s", "default", 1, N(n)), n)
        fill = time.perf_counter() - t0
        json.dumps(snapshot(core))
        if bound:
            core.tuples.committed()
        for n in range(size, size + 100):
            core.add(Tuple(None, "s", "default", 1, N(n)), n)
        t0 = time.perf_counter()
        body = json.dumps(snapshot(core))
        ck = time.perf_counter() - t0
        held = core.tuples.held() if bound else len(core.tuples)
        print(f"| {size} | {bound or 'unbounded'} | {fill * 1e6 / size:.1f} | {ck * 1000:.1f} "
              f"| {len(body) // 1024} | {held} |")
