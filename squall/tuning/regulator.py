"""Self-regulation's loop (Heron's Dhalion): observe a round, act on a symptom, judge
the action once the topology runs in its new shape, and undo it when it did not help.
A pure core: the shell (squall.nimbus.autoscale) reads the heartbeats, carries out
what :meth:`Regulator.round` returns through the rebalance operators use, and keeps
:meth:`Regulator.to_dict` in ZooKeeper, so that a nimbus that takes over carries on
(its window of rounds starts afresh: rounds seen by another nimbus are not trusted).

One action at a time: while one is judged nothing else is tried, and an action that
did not help is undone and not tried again for ``cooldown_secs``.  Every action, and
every diagnosis that could not be acted on (once, until it changes), is kept in the
action log with its symptom, diagnosis, resolution and outcome.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from squall.tuning.policies import Proposal, Settings, Shape, latency, overloaded, scale_down, scale_up
from squall.tuning.signals import Signals

MAX_ACTIONS = 100  # the action log keeps the latest
STUCK_ROUNDS = 8  # complete rounds without the new shape before an action is called failed


@dataclass
class Step:
    """What the shell must do after a round: nothing, an action, or an undo."""

    kind: str = "none"  # "none" | "act" | "undo" | "wait"
    entry: dict[str, Any] | None = None
    resolution: dict[str, Any] = field(default_factory=dict)
    reason: str = ""


class Regulator:
    def __init__(self, settings: Settings, saved: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self.window: deque[Signals] = deque(maxlen=max(settings.rounds, settings.quiet_rounds))
        saved = saved or {}
        self.actions: list[dict[str, Any]] = list(saved.get("actions") or [])[-MAX_ACTIONS:]
        self.evaluating: dict[str, Any] | None = saved.get("evaluating")
        self.cooldowns: dict[str, float] = dict(saved.get("cooldowns") or {})
        self.baseline_workers: int | None = saved.get("baseline_workers")
        self.noted: str | None = saved.get("noted")
        self.next_id = int(saved.get("next_id") or 1)

    def to_dict(self) -> dict[str, Any]:
        return {"actions": self.actions, "evaluating": self.evaluating, "cooldowns": self.cooldowns,
                "baseline_workers": self.baseline_workers, "noted": self.noted, "next_id": self.next_id}

    # -- a round -------------------------------------------------------------------

    def round(self, now: float, shape: Shape, signals: Signals | None, blocked: str | None = None) -> Step:
        """One round: ``signals`` None (or incomplete) when the round could not be read
        whole, ``blocked`` the reason nothing may change now (a rebalance in flight, the
        topology inactive)."""
        if self.baseline_workers is None:
            self.baseline_workers = shape.workers
        for key in [k for k, until in self.cooldowns.items() if until <= now]:
            del self.cooldowns[key]
        if blocked is not None:
            return Step("wait", reason=blocked)
        if signals is None or not signals.complete:
            missing = len(signals.missing) if signals is not None else "all"
            return Step("wait", reason=f"{missing} executors not reporting a whole round")
        if self.evaluating is not None:
            return self._judge(now, shape, signals)
        self.window.append(signals)
        return self._decide(now, shape)

    def failed(self, entry_id: int, reason: str) -> None:
        """The shell could not carry out an action (a rebalance refused, nimbus deposed)."""
        entry = self._entry(entry_id)
        if entry is not None:
            entry.update(status="failed", outcome=reason)
        if self.evaluating is not None and self.evaluating["id"] == entry_id:
            self.evaluating = None
        self.window.clear()

    # -- deciding ------------------------------------------------------------------

    def _decide(self, now: float, shape: Shape) -> Step:
        settings = self.settings
        if len(self.window) < settings.rounds:
            return Step(reason=f"{len(self.window)} of {settings.rounds} rounds seen")
        recent = list(self.window)[-settings.rounds:]
        shape.baseline_workers = self.baseline_workers or shape.workers
        proposals: list[Proposal] = [scale_up(recent, shape, settings, name)
                                     for name in overloaded(recent, shape, settings)]
        if not any(p.acts for p in proposals):
            pending = latency(recent, shape, settings)
            if pending is not None:
                proposals.append(pending)
        if not proposals and len(self.window) >= settings.quiet_rounds:
            proposals += scale_down(list(self.window)[-settings.quiet_rounds:], shape, settings)
        # The first proposal that can act does; else the first is noted (a bolt at its task
        # count may still have its latency brought down by the pending policy after it).
        noted: tuple[Proposal, str, str] | None = None
        for proposal in proposals:
            key = f"{proposal.policy}:{proposal.component}"
            if not proposal.acts:
                noted = noted or (proposal, key, "")
            elif key in self.cooldowns:
                why = f"not retried until its cool-down ends (an earlier {proposal.policy} did not help)"
                noted = noted or (proposal, key, why)
            else:
                return self._act(now, shape, proposal, recent)
        if noted is not None:
            return self._note(now, *noted)
        return Step(reason="no symptom")

    def _note(self, now: float, proposal: Proposal, key: str, why: str = "") -> Step:
        """A diagnosis nothing is done about: logged once while it lasts."""
        # The same finding with other numbers (a worker's CPU moves every round) is not news.
        note = re.sub(r"\d+(\.\d+)?", "#", f"{key}:{proposal.diagnosis}:{why}")
        if note != self.noted:
            self.noted = note
            self._log({"time": now, "policy": proposal.policy, "component": proposal.component,
                       "symptom": proposal.symptom, "diagnosis": proposal.diagnosis, "resolution": {},
                       "status": "noted", "outcome": why or "nothing to do"})
        return Step(reason=proposal.diagnosis)

    def _act(self, now: float, shape: Shape, proposal: Proposal, recent: list[Signals]) -> Step:
        resolution = proposal.resolution()
        undo: dict[str, Any] = {}
        if "executors" in resolution:
            undo["executors"] = {c: shape.executors[c] for c in resolution["executors"]}
        if "workers" in resolution:
            undo["workers"] = shape.workers
        if "max_pending" in resolution:
            undo["max_pending"] = {s: shape.max_pending.get(s) for s in resolution["max_pending"]}
        entry = self._log({"time": now, "policy": proposal.policy, "component": proposal.component,
                           "symptom": proposal.symptom, "diagnosis": proposal.diagnosis,
                           "resolution": resolution, "undo": undo, "status": "applied",
                           "before": _measure(recent, shape, proposal.component)})
        self.evaluating = {"id": entry["id"], "rounds": 0, "waited": 0}
        self.noted = None
        self.window.clear()  # rounds of the old shape say nothing of the new one
        return Step("act", entry, resolution, proposal.diagnosis)

    # -- judging -------------------------------------------------------------------

    def _judge(self, now: float, shape: Shape, signals: Signals) -> Step:
        assert self.evaluating is not None
        entry = self._entry(self.evaluating["id"])
        if entry is None:
            self.evaluating = None
            return Step(reason="the action judged is gone from the log")
        wanted = entry["resolution"].get("executors", {})
        running = {c: s.executors for c, s in signals.components.items()}
        # A lower max spout pending is in force once the trees over it have drained, and
        # the round they drained in still carries their waits: judged from the round after.
        bounds = entry["resolution"].get("max_pending", {})
        drained = all(c in signals.components and (signals.components[c].pending or 0)
                      <= n * max(signals.components[c].executors, 1) for c, n in bounds.items())
        if bounds and drained and not self.evaluating.get("drained"):
            self.evaluating["drained"] = True
            return Step("wait", reason="waiting for the trees in flight to drain")
        if any(running.get(c) != n for c, n in wanted.items()) or not drained:
            self.evaluating["waited"] += 1
            if self.evaluating["waited"] >= STUCK_ROUNDS:
                self.failed(entry["id"], "the topology did not take its new shape within "
                                         f"{STUCK_ROUNDS} rounds")
                return Step(reason="action failed")
            return Step("wait", reason="waiting for the new shape")
        self.window.append(signals)
        self.evaluating["rounds"] += 1
        if self.evaluating["rounds"] < self.settings.settle_rounds:
            return Step("wait", reason="judging the last action")
        settled = list(self.window)[-self.settings.settle_rounds:]
        after = _measure(settled, shape, entry["component"])
        helped, outcome = _helped(entry, entry["before"], after, self.settings,
                                  overloaded(settled, shape, self.settings))
        entry.update(after=after, judged_at=now)
        self.evaluating = None
        if helped:
            entry.update(status="helped", outcome=outcome)
            return Step(reason=outcome)
        entry.update(status="undone", outcome=outcome, undone_at=now)
        self.cooldowns[f"{entry['policy']}:{entry['component']}"] = now + self.settings.cooldown_secs
        self.window.clear()
        return Step("undo", entry, dict(entry.get("undo") or {}), outcome)

    # -- the log -------------------------------------------------------------------

    def _log(self, entry: dict[str, Any]) -> dict[str, Any]:
        entry = {"id": self.next_id, **entry}
        self.next_id += 1
        self.actions.append(entry)
        del self.actions[:-MAX_ACTIONS]
        return entry

    def _entry(self, entry_id: int) -> dict[str, Any] | None:
        return next((e for e in self.actions if e["id"] == entry_id), None)


def _measure(rounds: list[Signals], shape: Shape, component: str) -> dict[str, Any]:
    """What an action is judged by, averaged over ``rounds``."""
    def mean(values: list[float]) -> float:
        return round(sum(values) / len(values), 4) if values else 0.0

    rows = [s.components[component] for s in rounds if component in s.components]
    p99s = [c.p99_ms for s in rounds for c in s.components.values() if c.name in shape.spouts and c.p99_ms]
    return {"throughput": mean([s.throughput(shape.spouts) for s in rounds]),
            "capacity": mean([r.capacity for r in rows]), "congested": mean([r.congested for r in rows]),
            "executed": mean([r.executed_rate for r in rows]),
            "p99_ms": mean([p for p in p99s if p is not None]) if p99s else None}


def _helped(entry: dict[str, Any], before: dict[str, Any], after: dict[str, Any], settings: Settings,
            overloaded_now: list[str]) -> tuple[bool, str]:
    thr0, thr1 = before["throughput"], after["throughput"]
    moved = (f"throughput {thr0:.1f} -> {thr1:.1f}/s, {entry['component']} capacity "
             f"{before['capacity']:.2f} -> {after['capacity']:.2f}")
    policy = entry["policy"]
    if policy == "scale up":
        # More executors must carry more, or take the bolt out of its symptom at no loss: at
        # an input it already carries, the same tuples spread over more executors bring the
        # capacity down (a CPU-bound bolt's GIL-sharing threads would not: they stay busy).
        gained = thr1 >= thr0 * 1.05 or after["executed"] >= before["executed"] * 1.05
        relieved = (after["capacity"] < settings.capacity_high
                    and after["congested"] < settings.congested_high and thr1 >= thr0 * 0.95)
        return gained or relieved, moved + ("" if gained or relieved else ": no gain, undone")
    if policy == "scale down":
        # Judged by whether what is left keeps up, not by the throughput: an input that
        # fell meanwhile (often why the bolt idled) must not undo it.
        kept = not overloaded_now and after["capacity"] < settings.capacity_high
        return kept, moved + ("" if kept else ": overloaded a bolt, undone")
    p0, p1 = before.get("p99_ms"), after.get("p99_ms")
    latency_moved = f"p99 {p0 or 0:.1f} -> {p1 or 0:.1f} ms, throughput {thr0:.1f} -> {thr1:.1f}/s"
    target = settings.latency_p99_ms or 0.0
    was = entry["undo"].get("max_pending") or {}
    lowered = any(v is not None and (was.get(s) is None or v < was[s])
                  for s, v in entry["resolution"].get("max_pending", {}).items())
    if lowered:
        ok = p1 is not None and p0 is not None and (p1 <= target or p1 <= p0 * 0.9)
    else:
        ok = thr1 >= thr0 * 1.03 and (p1 is None or p1 <= target * 1.1)
    return ok, latency_moved + ("" if ok else ": did not help, undone")
