"""Issue 33's suite, faults of processes: one seeded schedule per class
(tests/partitions/faults.py), the checkers' verdicts asserted; and the checker shown to
see, on a real cluster: a word count that drops 1% of its words is caught."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.partitions import netns
from tests.partitions.cluster import tools_missing
from tests.partitions.faults import one_fault_run

_why_not = tools_missing() or netns.unavailable()
pytestmark = [pytest.mark.skipif(_why_not is not None, reason=f"network namespaces: {_why_not}"),
              pytest.mark.timeout(300)]


# Seeds chosen for where the fault lands (tests/partitions/nemesis.py draws the node):
# the leading nimbus or a supervisor, whose workers run the topologies; a fault of
# ZooKeeper alone is the chaos suite's (tests/cluster).
@pytest.mark.parametrize(("fault", "seed"), [
    ("pause", 9),  # the leader, past its session: the standby takes over, the old leader wakes up
    ("pause", 2),  # sup-3 and its workers, past every heartbeat timeout
])
def test_a_fault_of_a_process_loses_nothing_and_counts_nothing_twice(
        tmp_path: Path, fault: str, seed: int) -> None:
    result, _events = one_fault_run(tmp_path, fault, seed)
    print(result.report())
    assert all(v.valid for v in result.verdicts.values()), result.report()
    assert result.audit is not None and result.audit.valid, result.report()


def test_a_killed_node_loses_nothing_and_the_checker_catches_a_count_that_drops_words(
        tmp_path: Path) -> None:
    # Given the counts and a third topology whose count bolt skips every 100th word and
    # acks it anyway, when sup-3 and its workers are killed, then restarted
    result, _events = one_fault_run(tmp_path, "kill", 2, broken=True)
    print(result.report())
    # Then the two honest counts pass, one nimbus led, and the broken count is found losing words
    assert result.verdicts["alo"].valid and result.verdicts["eo"].valid, result.report()
    assert result.audit is not None and result.audit.valid, result.report()
    broken = result.verdicts["alo-broken"]
    assert not broken.valid and broken.of("lost") and not broken.of("phantom"), result.report()
    assert all(f.excerpt for f in broken.of("lost"))  # each finding quotes the messages behind it
