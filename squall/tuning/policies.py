"""Self-regulation's policies (Heron's Dhalion): each reads a window of rounds, names a
symptom, diagnoses its cause and proposes a resolution.  A pure core: the regulator
(squall.tuning.regulator) chooses among them, keeps what was done and judges it.

* **overloaded** — a bolt whose busiest executor stays busy (capacity at or over
  ``capacity_high``) or whose queue holds the spouts back (congested more than
  ``congested_high`` of a round), every round of the window.  Diagnosed as:
    - *data skew* when one executor takes far more than its share of the tuples while
      the others idle: more executors would not spread a hot key; nothing is done;
    - *under-provisioned, CPU bound* when its busiest executor's thread is on a CPU for
      most of its busy time (or, where threads report no CPU time, its worker uses a whole
      core): in one Python process threads share the GIL, so more executors need another
      worker as well (one more, where the cluster has a free slot and the ceiling allows);
    - *under-provisioned, waiting* otherwise (I/O, sleeps, a remote call): more
      executors in the same workers help.
  Resolution: executors for the target capacity (``capacity_target``) given the load
  seen, at least one more, never past the component's task count (as in Storm, an
  executor runs one or more tasks: the tasks set the ceiling).
* **latency over target** (``latency_p99_ms``): a spout's p99 over the target while no
  bolt can be scaled (none overloaded, or those that are at their task count or ceiling)
  — trees wait in queues, not for a missing executor — so fewer in flight: max spout
  pending by Little's law (value x target / p99, with a margin).
  Under the target, with the spout held by its max spout pending, a quarter more.
* **over-provisioned** — a bolt whose executors all idle (capacity under
  ``capacity_low``) for ``quiet_rounds`` rounds with nothing overloaded anywhere:
  executors for the target capacity, fewer than now; workers added by an earlier
  scale-up are given back when the topology's CPU fits in fewer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from squall.tuning.signals import ComponentSignals, Signals


@dataclass(frozen=True)
class Settings:
    period_secs: float = 30.0
    capacity_high: float = 0.8
    capacity_low: float = 0.25
    capacity_target: float = 0.6
    congested_high: float = 0.1
    rounds: int = 3  # rounds a symptom must hold before anything is done
    quiet_rounds: int = 10  # rounds a bolt idles before it is scaled down
    settle_rounds: int = 3  # complete rounds after an action before it is judged
    cooldown_secs: float = 600.0  # an action undone is not tried again for this long
    max_workers: int = 4
    min_workers: int = 1
    worker_cpu_high: float = 0.85  # cores: a worker this busy is CPU bound
    cpu_share_high: float = 0.5  # an executor on a CPU this share of its busy time computes
    latency_p99_ms: float | None = None


@dataclass
class Shape:
    """The topology as it runs now, as the shell sees it."""

    executors: dict[str, int]  # component -> executors
    tasks: dict[str, int]  # component -> tasks (the ceiling of its executors)
    spouts: frozenset[str]
    workers: int
    free_slots: int  # slots the cluster could give this topology now
    baseline_workers: int  # the workers before self-regulation changed anything
    max_pending: dict[str, int | None] = field(default_factory=dict)  # spout -> per executor


@dataclass
class Proposal:
    """What a policy would do, and why."""

    policy: str  # "scale up" | "scale down" | "max spout pending"
    component: str
    symptom: str
    diagnosis: str
    executors: dict[str, int] = field(default_factory=dict)
    workers: int | None = None
    max_pending: dict[str, int] = field(default_factory=dict)

    @property
    def acts(self) -> bool:
        return bool(self.executors or self.workers is not None or self.max_pending)

    def resolution(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.executors:
            out["executors"] = dict(self.executors)
        if self.workers is not None:
            out["workers"] = self.workers
        if self.max_pending:
            out["max_pending"] = dict(self.max_pending)
        return out


def _rows(window: list[Signals], name: str) -> list[ComponentSignals]:
    return [s.components[name] for s in window if name in s.components]


def overloaded(window: list[Signals], shape: Shape, settings: Settings) -> list[str]:
    """Bolts overloaded every round of the window, the most congested first."""
    out = []
    for name in shape.executors:
        if name in shape.spouts or name.startswith("__"):
            continue
        rows = _rows(window, name)
        if len(rows) == len(window) and all(r.capacity >= settings.capacity_high
                                            or r.congested >= settings.congested_high for r in rows):
            out.append(name)
    last = window[-1].components
    return sorted(out, key=lambda n: (-last[n].congested, -last[n].capacity, n))


def scale_up(window: list[Signals], shape: Shape, settings: Settings, name: str) -> Proposal:
    rows = _rows(window, name)
    last = rows[-1]
    capacity = sum(r.capacity for r in rows) / len(rows)
    congested = sum(r.congested for r in rows) / len(rows)
    symptom = (f"{name} overloaded for {len(rows)} rounds: capacity {capacity:.2f}"
               + (f", its queue congested {congested:.0%} of the time" if congested else ""))
    n = shape.executors[name]
    if n > 1 and last.shares and max(last.shares) > 1.5 / n and last.capacity_mean < 0.5 * last.capacity:
        hot = max(last.shares)
        return Proposal("scale up", name, symptom,
                        f"data skew: one executor takes {hot:.0%} of {name}'s tuples while the others idle "
                        f"(a hot key under a fields grouping?); more executors would not spread it")
    # Storm's capacity saturates at 1: a congested queue says the load is higher still.
    load = capacity * n * (1 + congested)
    want = min(shape.tasks.get(name, n), max(n + 1, math.ceil(load / settings.capacity_target)))
    # CPU bound: its thread computes most of the time it is busy (where threads report their
    # CPU), or its worker uses a whole core.  Judged by the thread where it can be: on a
    # loaded machine a CPU-bound worker may get much less than a core.
    share = last.cpu_share
    cpu_bound = (share >= settings.cpu_share_high if share is not None
                 else last.worker_cpu >= settings.worker_cpu_high)
    workers = None
    if cpu_bound and shape.workers < settings.max_workers and shape.free_slots > 0:
        workers = shape.workers + 1
    computes = "" if share is None else f"it computes {share:.0%} of its busy time, "
    if cpu_bound:
        diagnosis = (f"under-provisioned, CPU bound: {computes}its worker uses {last.worker_cpu:.2f} "
                     "of a core (threads in one Python process share the GIL)")
        if workers is None:
            diagnosis += ("; no worker can be added (" + ("no free slot" if shape.free_slots <= 0 else
                          f"at the ceiling of {settings.max_workers} workers") + ")")
    else:
        diagnosis = f"under-provisioned, waiting: {computes}its worker uses {last.worker_cpu:.2f} of a core"
    proposal = Proposal("scale up", name, symptom, diagnosis, workers=workers)
    if want > n:
        proposal.executors = {name: want}
    elif workers is None:
        proposal.diagnosis += f"; it runs as many executors as it has tasks ({n}): nothing to add"
    return proposal


def latency(window: list[Signals], shape: Shape, settings: Settings) -> Proposal | None:
    """The max spout pending policy, for the first spout off its latency target."""
    target = settings.latency_p99_ms
    if target is None:
        return None
    for name in sorted(shape.spouts):
        rows = _rows(window, name)
        if len(rows) < len(window) or any(r.p99_ms is None for r in rows):
            continue
        p99 = sum(r.p99_ms for r in rows if r.p99_ms is not None) / len(rows)
        per_executor = shape.max_pending.get(name)
        executors = max(shape.executors.get(name, 1), 1)
        in_flight = (rows[-1].pending or 0) / executors
        current = per_executor if per_executor is not None else max(int(in_flight), 1)
        if p99 > target * 1.1:
            value = max(1, math.floor(current * target / p99 * 0.9))
            if value < current:
                return Proposal("max spout pending", name,
                                f"{name}'s p99 {p99:.1f} ms over the {target:g} ms target "
                                f"for {len(rows)} rounds",
                                f"trees wait in queues ({current} in flight an executor): fewer keep the "
                                "latency under the target (Little's law)", max_pending={name: value})
        elif (p99 < target * 0.6 and per_executor is not None and in_flight >= 0.8 * per_executor):
            value = math.ceil(per_executor * 1.25)
            return Proposal("max spout pending", name,
                            f"{name}'s p99 {p99:.1f} ms well under the {target:g} ms target, "
                            f"held by its max spout pending ({per_executor})",
                            "room under the target: more trees in flight may carry more",
                            max_pending={name: value})
    return None


def scale_down(window: list[Signals], shape: Shape, settings: Settings) -> list[Proposal]:
    """Each bolt idle through the quiet window (``window`` is that long), then workers to
    give back."""
    if overloaded(window[-settings.rounds:], shape, settings):
        return []
    out = []
    for name in sorted(shape.executors):
        n = shape.executors[name]
        if name in shape.spouts or name.startswith("__") or n <= 1:
            continue
        rows = _rows(window, name)
        if len(rows) < len(window) or any(r.capacity >= settings.capacity_low or r.congested > 0
                                          for r in rows):
            continue
        peak = max(r.capacity for r in rows)
        want = max(1, math.ceil(peak * n / settings.capacity_target))
        if want < n:
            out.append(Proposal("scale down", name,
                                f"{name} idle for {len(rows)} rounds: capacity at most {peak:.2f}",
                                f"over-provisioned: {want} executor(s) would run at about "
                                f"{peak * n / want:.2f}", executors={name: want}))
    if shape.workers > max(shape.baseline_workers, settings.min_workers):
        busiest = [sum(s.workers_cpu.values()) for s in window]
        if busiest and max(busiest) < settings.worker_cpu_high * 0.5 * (shape.workers - 1):
            out.append(Proposal("scale down", "(workers)",
                                f"the topology's workers used at most {max(busiest):.2f} cores over "
                                f"{len(window)} rounds",
                                f"over-provisioned: {shape.workers - 1} workers hold it",
                                workers=shape.workers - 1))
    return out
