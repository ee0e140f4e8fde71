"""Issue 33's suite, network faults: one seeded schedule per class against a cluster in
network namespaces (tests/partitions/faults.py), the checkers' verdicts asserted --
nothing acked lost, nothing committed twice, no DRPC read of a Trident count below what had
committed before it was asked (nor above what could have by its answer, nor below an
earlier read), at most one acting leader."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.partitions import netns
from tests.partitions.cluster import tools_missing
from tests.partitions.faults import one_fault_run

_why_not = tools_missing() or netns.unavailable()
pytestmark = [pytest.mark.skipif(_why_not is not None, reason=f"network namespaces: {_why_not}"),
              pytest.mark.timeout(300)]


@pytest.mark.parametrize(("fault", "seed"), [
    ("partition-random-node", 3),
    ("partition-halves", 1),
    ("partition-supervisor-from-zk", 1),
    ("partition-leader-from-zk", 1),
])
def test_a_partition_loses_nothing_counts_nothing_twice_and_one_nimbus_leads(
        tmp_path: Path, fault: str, seed: int) -> None:
    result, _events = one_fault_run(tmp_path, fault, seed, trident=True)
    print(result.report())
    assert all(v.valid for v in result.verdicts.values()), result.report()
    assert result.audit is not None and result.audit.valid, result.report()
    assert result.audit.stats["writes"] >= 1  # the audit saw the leader act
    assert result.verdicts["trident"].stats["reads"] >= 40  # DRPC answered, checked against the commits
