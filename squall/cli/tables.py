"""Tables a person reads, from the answers of nimbus's Storm-shaped REST API.

Pure functions of the JSON nimbus gives (``/api/v1/topology/:id``, its
component page and errors), so ``squall info``, ``squall monitor`` and
``squall errors`` print the same numbers the API and the UI show.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[bool] | None = None) -> str:
    """Columns sized to their content; numbers right-aligned."""
    cells = [[str(h) for h in headers]] + [["" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    if right is None:
        right = [i > 0 for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        lines.append("  ".join(c.rjust(widths[i]) if right[i] else c.ljust(widths[i])
                               for i, c in enumerate(row)))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _n(value: Any) -> str:
    return f"{int(value):,}" if isinstance(value, (int, float)) else str(value or 0)


def _rate(value: Any, seconds: float) -> str:
    if not isinstance(value, (int, float)) or seconds <= 0:
        return "-"
    return f"{value / seconds:,.1f}"


def _span(page: dict[str, Any]) -> float:
    """Seconds the chosen window covers (shorter for a young topology)."""
    window = str(page.get("window", "600"))
    uptime = float(page.get("uptimeSeconds") or 0)
    return uptime if not window.isdigit() else min(float(window), uptime)


def topology_report(page: dict[str, Any]) -> str:
    span = _span(page)
    head = (f"topology {page.get('name')} ({page.get('id')}): {page.get('status')}, "
            f"up {page.get('uptime')}, {page.get('workersTotal')} workers, "
            f"{page.get('executorsTotal')} executors, {page.get('tasksTotal')} tasks; "
            f"window {page.get('windowHint') or page.get('window')}")
    if "schedulerInfo" in page:  # scheduled by resources (docs/scheduling.md)
        head += (f"\nresources: {page.get('requestedTotalMem')} MB and {page.get('requestedCpu')}% CPU "
                 f"requested, {page.get('assignedTotalMem')} MB and {page.get('assignedCpu')}% assigned; "
                 f"{page['schedulerInfo']}")
    spouts = table(
        ["spout", "executors", "emitted", "emitted/s", "acked", "acked/s", "failed", "complete ms",
         "last error"],
        [[s["spoutId"], s.get("executors"), _n(s.get("emitted")), _rate(s.get("emitted"), span),
          _n(s.get("acked")), _rate(s.get("acked"), span), _n(s.get("failed")), s.get("completeLatency"),
          _short(s.get("lastError"))]
         for s in page.get("spouts", [])])
    bolts = table(
        ["bolt", "executors", "executed", "executed/s", "emitted", "acked", "failed", "execute ms",
         "process ms", "capacity", "last error"],
        [[b["boltId"], b.get("executors"), _n(b.get("executed")), _rate(b.get("executed"), span),
          _n(b.get("emitted")), _n(b.get("acked")), _n(b.get("failed")), b.get("executeLatency"),
          b.get("processLatency"), b.get("capacity"), _short(b.get("lastError"))]
         for b in page.get("bolts", [])])
    workers = table(
        ["host", "port", "executors", "uptime", "memory limit MB", "components"],
        [[w.get("host"), w.get("port"), w.get("executorsTotal"), w.get("uptime"),
          w.get("assignedMemOnHeap", "-"),
          ", ".join(f"{c}:{n}" for c, n in sorted((w.get("componentNumTasks") or {}).items()))]
         for w in page.get("workers", [])], right=[False, True, True, True, True, False])
    return "\n\n".join([head, spouts, bolts, workers])


def trace_site(trace: str) -> str:
    """A trace without its exception's message: where it was raised and what it raised
    (so that one bad line raising on every tuple is one trace, whatever the values)."""
    lines = str(trace).rstrip().splitlines()
    if not lines:
        return ""
    last = lines[-1]
    return "\n".join([*lines[:-1], last.split(":", 1)[0]])


def errors_report(errors: Sequence[dict[str, Any]], now: float | None = None, traces: bool = True) -> str:
    """The errors as a table, oldest first, then (``traces``) each distinct trace once,
    newest first: where it was raised, with how many more errors were the same."""
    if not errors:
        return "no errors reported"
    now = time.time() if now is None else now
    rows = []

    def ago(e: dict[str, Any]) -> str:
        when = e.get("errorTime") or e.get("time")
        return f"{int(now - when)}s ago" if isinstance(when, (int, float)) else "-"

    def where(e: dict[str, Any]) -> str:
        return e.get("worker") or (f"{e.get('errorHost') or e.get('node') or '-'}:"
                                   f"{e.get('errorPort') or e.get('port') or '-'}")

    for e in errors:
        error = ("FATAL " if e.get("fatal") else "") + _short(e.get("error"), 100)
        component = e.get("component") or e.get("componentId") or "-"
        rows.append([ago(e), component, e.get("task", "-"), where(e), error])
    out = table(["when", "component", "task", "where", "error"], rows,
                right=[True, False, True, False, False])
    if not traces:
        return out
    newest: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}  # (component, site) -> (error, trace)
    more: dict[tuple[str, str], int] = {}
    for e in reversed(errors):
        trace = str(e.get("trace") or "").rstrip()
        if not trace:
            continue
        key = (str(e.get("component") or e.get("componentId") or "-"), trace_site(trace))
        if key in newest:
            more[key] = more.get(key, 0) + 1
        else:
            newest[key] = (e, trace)
    for key, (e, trace) in newest.items():
        component, more_like_it = key[0], more.get(key, 0)
        head = f"{component}, task {e.get('task', '-')}, {where(e)}, {ago(e)}"
        head += f" (and {more_like_it} more like it)" if more_like_it else ""
        out += f"\n\n{head}:\n" + "\n".join("  " + line for line in trace.splitlines())
    return out


def monitor_counts(page: dict[str, Any]) -> dict[str, tuple[float, float, float]]:
    """Each component's all-time (emitted or executed, acked, failed) on a topology page."""
    out = {s["spoutId"]: (s.get("emitted", 0), s.get("acked", 0), s.get("failed", 0))
           for s in page.get("spouts", [])}
    out.update({b["boltId"]: (b.get("executed", 0), b.get("acked", 0), b.get("failed", 0))
                for b in page.get("bolts", [])})
    return out


def paced_snapshots(snapshot: Callable[[], dict[str, Any]], interval: float, now: Callable[[], float],
                    sleep: Callable[[float], None], poll: float = 0.25) -> Iterator[tuple[Any, Any, float]]:
    """(before, after, seconds) every ``interval`` or so, for ``squall monitor``.

    Nimbus's counters move when heartbeats arrive, not continuously: a rate taken over
    the wall-clock interval between two requests alternates between 0/s and double
    when the interval and the heartbeat period do not divide.  So the counters are
    polled, and each rate is over the time between two *changes* of them (the
    heartbeats' own spacing), never over an interval that saw no new stats."""
    stalled = max(3 * interval, 10.0)  # no new stats for this long: the rate is 0, said so
    page, start = snapshot(), now()
    base, base_t = page, start
    while now() - start < stalled:  # the first baseline is a change too: when its stats arrived
        sleep(poll)
        fresh = snapshot()
        if monitor_counts(fresh) != monitor_counts(page):
            base, base_t = fresh, now()
            break
    while True:
        deadline = base_t + interval
        latest, latest_t = base, base_t
        while True:
            sleep(poll)
            fresh = snapshot()
            t = now()
            if monitor_counts(fresh) != monitor_counts(latest):
                latest, latest_t = fresh, t
            if t >= deadline and (latest_t > base_t or t - base_t >= stalled):
                break
        if latest_t == base_t:  # nothing moved (an inactive topology): 0/s over the wait
            latest_t = t
        yield base, latest, latest_t - base_t
        base, base_t = latest, latest_t


def monitor_line(before: dict[str, Any], after: dict[str, Any], seconds: float,
                 component: str | None) -> str:
    """One line of ``squall monitor``: what each component did between two all-time snapshots."""
    old, new = monitor_counts(before), monitor_counts(after)
    names = [component] if component else sorted(new)
    parts = []
    for name in names:
        if name not in new:
            parts.append(f"{name}: unknown")
            continue
        o = old.get(name, (0, 0, 0))
        n = new[name]
        rates = [(n[i] - o[i]) / seconds for i in range(3)]
        parts.append(f"{name} {rates[0]:,.0f}/s acked {rates[1]:,.0f}/s failed {rates[2]:,.0f}/s")
    return time.strftime("%H:%M:%S ") + "  ".join(parts)


def _short(text: Any, limit: int = 40) -> str:
    text = str(text or "").splitlines()[0] if text else ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _resolution(resolution: dict[str, Any]) -> str:
    parts = [f"executors {c}={n}" for c, n in sorted((resolution.get("executors") or {}).items())]
    if resolution.get("workers") is not None:
        parts.append(f"workers={resolution['workers']}")
    parts += [f"max spout pending {s}={n}" for s, n in sorted((resolution.get("max_pending") or {}).items())]
    return ", ".join(parts) or "none"


def autoscale_report(answer: dict[str, Any]) -> str:
    """``GET /api/v1/topology/:id/autoscale`` for a person: the switch, then each action
    (newest first) with its symptom, diagnosis, resolution and outcome."""
    lines = [f"self-regulation of {answer['topology']}: {'enabled' if answer['enabled'] else 'disabled'}"]
    pending = answer.get("maxSpoutPending") or {}
    if pending:
        lines.append("max spout pending set: " + ", ".join(f"{s}={n}" for s, n in sorted(pending.items())))
    for key, until in sorted((answer.get("coolDowns") or {}).items()):
        lines.append(f"cooling down: {key} until {time.strftime('%H:%M:%S', time.localtime(until))}")
    if not answer.get("actions"):
        lines.append("no actions yet")
    for a in answer.get("actions") or []:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(a["time"]))
        status = "judging" if a["id"] == answer.get("judging") else a["status"]
        lines += [f"#{a['id']}  {when}  {a['policy']}  {a['component']}  {status}",
                  f"    symptom:    {a['symptom']}", f"    diagnosis:  {a['diagnosis']}",
                  f"    resolution: {_resolution(a.get('resolution') or {})}"]
        if a.get("outcome"):
            lines.append(f"    outcome:    {a['outcome']}")
    return "\n".join(lines)
