"""Issue 33's suite, faults of links and clocks: one seeded schedule per class
(tests/partitions/faults.py), the checkers' verdicts asserted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.partitions import netns
from tests.partitions.cluster import LIBFAKETIME, tools_missing
from tests.partitions.faults import one_fault_run
from tests.partitions.recovery import episodes

_why_not = tools_missing() or netns.unavailable()
pytestmark = [pytest.mark.skipif(_why_not is not None, reason=f"network namespaces: {_why_not}"),
              pytest.mark.timeout(300)]


@pytest.mark.parametrize(("fault", "seed"), [
    ("slow-net", 4),  # sup-1 on a 286 kbit/s link
    ("lossy-net", 3),  # sup-2 losing 20% of its packets both ways
])
def test_a_slow_or_lossy_link_loses_nothing_and_counts_nothing_twice(tmp_path: Path, fault: str,
                                                                     seed: int) -> None:
    result, _events = one_fault_run(tmp_path, fault, seed)
    print(result.report())
    assert all(v.valid for v in result.verdicts.values()), result.report()
    assert result.audit is not None and result.audit.valid, result.report()


@pytest.mark.skipif(not LIBFAKETIME.exists(), reason="apt-get install faketime (ops/bootstrap.sh --tests)")
@pytest.mark.parametrize("seed", [
    9,  # the leading nimbus's clock 44 s ahead: it judged every worker dead at once
    1,  # sup-2's clock 18.6 s ahead: its supervisor killed its own beating workers
])
def test_a_clock_that_jumps_ahead_moves_and_kills_no_worker_and_loses_nothing(tmp_path: Path,
                                                                               seed: int) -> None:
    """docs/partitions.md, "Heartbeats judged by a skewed clock": a node's wall clock
    stepped past the timeouts for 18-22 s, then back."""
    result, _events = one_fault_run(tmp_path, "clock-skew", seed, skewable=True)
    print(result.report())
    assert all(v.valid for v in result.verdicts.values()), result.report()
    assert result.audit is not None and result.audit.valid, result.report()
    # Nothing died: no worker judged dead and moved, or killed, while the clock was off or after
    [skewed] = episodes(result.workloads[0].history.ops, result.nemesis.ops)
    moved = [w for w in result.leaders.writes if w.time >= skewed.start]
    assert not moved, f"assignments written after the clock jumped: {moved}\n{result.report()}"
    killed = [line for log in (tmp_path / "cluster" / "logs").glob("supervisor-*.log")
              for line in log.read_text().splitlines() if "worker killed" in line]
    assert not killed, killed
