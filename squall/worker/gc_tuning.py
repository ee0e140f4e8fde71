"""Garbage-collector tuning for processes that run workers.

Tuples never form reference cycles, so reference counting frees them all;
but each is a container object, and with CPython's default gen-0 threshold
(700) the cyclic collector runs every few hundred tuples and keeps scanning
the tuples waiting in queues.  Measured on the word-count benchmark, a gen-0
threshold of 50,000 is worth about 30% of throughput.  A threshold the user
already changed is left alone.

Once a cluster worker's executors are ready, its process's heap is frozen (gc.freeze):
the full collections the tuned thresholds still make would otherwise scan
every module, class and table the process holds, each time; in a cluster
worker that was a tenth of its time.  What is frozen is never collected as
a cycle, which costs nothing for live objects and, for the garbage cycles
alive at that moment, a one-off leak.  Local mode does not freeze: its
process outlives the topologies it runs, and a killed topology's cycles must
still be collected.  ``worker.gc.gen0.threshold: 0`` turns both off.
"""

from __future__ import annotations

import gc

CPYTHON_DEFAULT_GEN0 = 700


def freeze_startup_objects() -> None:
    """Move every object alive now (modules, classes, the plan, what the components'
    initialize built) out of the collector's reach: a full collection then scans
    only what the topology allocated since, not the whole heap each time."""
    gc.freeze()


def tune_gc(gen0_threshold: int) -> bool:
    """Raise the gen-0 threshold if it is still CPython's default.

    True if the collector is Squall's to tune in this process: changed now, or
    by an earlier worker of this process (local mode runs several); False when
    the user set a threshold of their own or turned the tuning off.
    """
    current = gc.get_threshold()
    if gen0_threshold <= 0:
        return False
    if current[0] == CPYTHON_DEFAULT_GEN0:
        gc.set_threshold(gen0_threshold, *current[1:])
        return True
    return current[0] == gen0_threshold
