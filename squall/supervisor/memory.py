"""Workers held to their memory limits, decided apart from processes (docs/scheduling.md).

A worker of a topology scheduled by resources carries a memory limit in its
assignment (``memory_limit_mb``: squall.nimbus.packing.worker_limit).  Each
process sync the supervisor samples the worker's resident memory (RSS, its
multilang children's included) and hands it here with its own monotonic time; a
worker over its limit for ``supervisor.worker.memory.limit.samples`` samples in
a row is to be killed and restarted (:class:`OverLimit` says why).  One sample under
the limit starts the count again, so a short burst (a large batch, a garbage
collection not yet run) is forgiven; a new launch of the slot starts afresh.

RSS, not cgroups: the nodes Squall runs on have cgroup v1 at best, and a
limit the kernel enforces kills without a word; this way the worker's log,
the supervisor's and the topology's errors say why.
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024
MEMORY_LIMIT = "memory-limit"  # the kill's reason, as sync.py names the others


@dataclass(frozen=True)
class OverLimit:
    """Kill the slot's worker: over its memory limit for ``samples`` samples."""

    port: int
    rss_mb: float
    limit_mb: float
    samples: int
    over_secs: float  # since the first sample of the run over the limit

    def reason(self) -> str:
        return (f"worker over its memory limit: {self.rss_mb:.0f} MB resident, limit {self.limit_mb:g} MB "
                f"(its executors' declared memory and the interpreter's allowance), "
                f"for {self.samples} samples "
                f"over {self.over_secs:.1f}s; killed and restarted")


@dataclass
class _Run:
    launch: str | None
    count: int = 0
    since: float = 0.0


class MemoryWatch:
    """Consecutive samples over the limit, per slot; its only memory is the current run."""

    def __init__(self, samples: int) -> None:
        self.samples = samples
        self._runs: dict[int, _Run] = {}

    def sample(self, port: int, launch: str | None, rss_bytes: int, limit_mb: float | None,
               local: float) -> OverLimit | None:
        """One sample of the worker on ``port`` (launch ``launch``); an OverLimit once it has
        been over ``limit_mb`` (None: no limit) for enough samples in a row."""
        run = self._runs.get(port)
        if run is None or run.launch != launch:
            run = self._runs[port] = _Run(launch)
        rss_mb = rss_bytes / MIB
        if limit_mb is None or rss_mb <= limit_mb:
            run.count = 0
            return None
        if run.count == 0:
            run.since = local
        run.count += 1
        if run.count < self.samples:
            return None
        over = OverLimit(port, rss_mb, limit_mb, run.count, local - run.since)
        self.forget(port)
        return over

    def forget(self, port: int) -> None:
        """The slot runs nothing (or something new): its count goes."""
        self._runs.pop(port, None)
