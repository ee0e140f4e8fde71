"""Issue 33's longer run: each fault class played for ``--minutes`` against a cluster in
network namespaces (tests/partitions: the at-least-once and the transactional word count
fed by a client, Jepsen-style histories, the checkers), and what each fault cost.

    python benchmarks/partitions.py --minutes 3 [--fault pause --fault kill ...]   # as root
        [--seed 1] [--rate 30] [--plots docs/partitions]

Needs root (``ip netns``), as CI has.  Per fault class a fresh cluster (ZooKeeper, two
nimbuses, three supervisors), a seeded schedule of faults of that class (a quiet gap of
10-20 s, a fault of 15-30 s, pauses at least 20 s), the client offering ``--rate``
sentences a second to each topology.  Printed, per class (medians over its faults, the
worst in brackets):

* time until throughput is back to 90% of what it was before the fault, from the fault's
  end (acks of the at-least-once count; commits of the transactional one), on a 3 s window;
* the lowest throughput while the fault held, as a share of that;
* p99 complete latency of the messages sent during the fault, from the client's send to
  its ack or commit (the queue included: what a user waits);
* messages replayed: counted more than once by the at-least-once count (allowed there);
* the checkers' verdicts (both counts and the leader audit).

With matplotlib (the ``bench`` extra), ``--plots DIR`` writes DIR/<fault class>.png:
throughput a second with the faults shaded.  Nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.partitions.faults import one_fault_run  # noqa: E402 - the repository's root first
from tests.partitions.nemesis import FAULTS, Timing  # noqa: E402
from tests.partitions.recovery import Episode, episodes, rates  # noqa: E402
from tests.partitions.workload import AtLeastOnce, Run  # noqa: E402

TIMING = Timing(gap=(10.0, 20.0), fault=(15.0, 30.0), pause_min=20.0)


def _median(values: list[float | None]) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return "-"
    return f"{statistics.median(known):.1f} ({max(known):.1f})"


def summarize(fault: str, result: Run) -> dict[str, Any]:
    nemesis = result.nemesis.ops
    by_name = {w.name: w for w in result.workloads}
    alo, eo = by_name["alo"], by_name["eo"]
    acks = episodes(alo.history.ops, nemesis)
    commits = episodes(eo.history.ops, nemesis)
    assert isinstance(alo, AtLeastOnce)
    replayed_messages, _words = alo.replayed()
    verdicts = {**{n: v.valid for n, v in result.verdicts.items()},
                "leaders": result.audit is not None and result.audit.valid}
    return {"fault": fault, "faults": len(acks), "acks": acks, "commits": commits,
            "replayed": replayed_messages, "messages": len(alo.done), "verdicts": verdicts}


def _share(episodes_: list[Episode]) -> str:
    shares = [e.lowest / e.baseline * 100 for e in episodes_ if e.baseline]
    return f"{statistics.median(shares):.0f}% ({min(shares):.0f}%)" if shares else "-"


def table(rows: list[dict[str, Any]]) -> str:
    lines = [("| fault class | faults | to 90%, acks (s) | to 90%, commits (s) | lowest, acks | "
              "p99 during, acks (ms) | p99 during, commits (ms) | replayed | verdicts |"),
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        verdicts = "all valid" if all(r["verdicts"].values()) else \
            ", ".join(f"{k} INVALID" for k, ok in r["verdicts"].items() if not ok)
        lines.append(
            f"| {r['fault']} | {r['faults']} | {_median([e.recovery for e in r['acks']])} | "
            f"{_median([e.recovery for e in r['commits']])} | {_share(r['acks'])} | "
            f"{_median([e.p99_ms for e in r['acks']])} | {_median([e.p99_ms for e in r['commits']])} | "
            f"{r['replayed']} of {r['messages']} | {verdicts} |")
    return "\n".join(lines)


def plot(fault: str, result: Run, rate: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = {w.name: [op.time for op in w.history.ops if op.type == "ok"] for w in result.workloads}
    begin = min(op.time for w in result.workloads for op in w.history.ops)
    end = max(t for times in ops.values() for t in times)
    fig, ax = plt.subplots(figsize=(10, 3.6))
    top = 4 * rate  # a backlog committed in one batch would flatten the rest: its peak is written
    for name, label in (("alo", "at-least-once count: acks/s"), ("eo", "transactional count: commits/s")):
        series = rates(ops[name], begin, end)
        ax.plot([t - begin for t, _n in series], [min(n, top) for _t, n in series], linewidth=1, label=label)
        for t, n in series:
            if n > top:
                ax.annotate(f"{n}", (t - begin, top), fontsize=7, ha="center", va="bottom")
    for i, e in enumerate(episodes(result.workloads[0].history.ops, result.nemesis.ops)):
        ax.axvspan(e.start - begin, e.stop - begin, color="red", alpha=0.12,
                   label="fault" if i == 0 else None)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("messages / s")
    ax.set_title(f"{fault}: throughput under its faults ({rate:g} sentences/s offered to each count)")
    ax.set_ylim(0, top * 1.1)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=3.0, help="schedule length per fault class")
    parser.add_argument("--fault", action="append", choices=FAULTS, help="a class to run (default: all)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rate", type=float, default=30.0, help="sentences a second offered to each count")
    parser.add_argument("--plots", type=Path, help="write a PNG per fault class here")
    args = parser.parse_args(argv)
    rows = []
    for fault in args.fault or FAULTS:
        with tempfile.TemporaryDirectory(prefix=f"squall-partitions-{fault}-") as tmp:
            result, _events = one_fault_run(Path(tmp), fault, args.seed, length=args.minutes * 60,
                                            timing=TIMING, skewable=fault == "clock-skew", rate=args.rate,
                                            after=15.0, drain=300.0)
            row = summarize(fault, result)
            rows.append(row)
            print(f"{fault}: {row['faults']} faults, verdicts {row['verdicts']}", flush=True)
            if not all(row["verdicts"].values()):
                print(result.report(), flush=True)
            if args.plots:
                args.plots.mkdir(parents=True, exist_ok=True)
                plot(fault, result, args.rate, args.plots / f"{fault}.png")
    print()
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
