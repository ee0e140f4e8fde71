"""A deposed nimbus leader writes no assignment: its writes are fenced by its
leadership term, checked by ZooKeeper in the same transaction as the write.

Before the fence, a leader partitioned from ZooKeeper (or paused) past its
session timeout still believed it led until it next looked at its session,
and a reconciliation round under way wrote its assignment over the new
leader's as soon as the connection came back.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from squall import config as config_mod
from squall.cluster.election import LeaderElection, LeaderFence, NotLeader
from squall.cluster.session import Session
from squall.cluster.state import ClusterState
from squall.cluster.zookeeper import DevZookeeper, disconnect, start_client
from squall.errors import Unavailable
from squall.nimbus.control import TopologyControl
from squall.nimbus.submission import Submission
from squall.testing import poll_for
from tests.cluster.test_nimbus_reconcile import NODE, PORTS, add_topology, slots
from tests.cluster.test_zookeeper_session import expire
from tests.helpers import IdlePipeline, keyring_conf


class Contender:
    """A nimbus's state, election, control and submission on a client of its own."""

    def __init__(self, conf: dict[str, Any], name: str) -> None:
        self.client = start_client(conf)
        self.state = ClusterState(self.client, conf["storm.zookeeper.root"])
        self.state.setup(fix_acls=False)
        self.session = Session(self.client, name)
        self.session.start()
        self.election: LeaderElection = self.state.election(name, self.session, lambda _leading: None)
        # The round's term as control asks for it; a test may hold it past the term's end.
        self.held: LeaderFence | None = None
        self.control = TopologyControl(self.state, conf, leadership=lambda: self.held or self.election.fence)
        self.submission = Submission(self.state, conf, self.control.reconcile, self.control.put_topology)
        self.election.start()

    def close(self) -> None:
        self.election.stop()
        self.election.join(10)
        disconnect(self.client)


@pytest.fixture
def contenders(zookeeper: DevZookeeper, tmp_path: Path) -> Iterator[list[Contender]]:
    conf = config_mod.merge({"storm.zookeeper.port": zookeeper.port, **keyring_conf(tmp_path),
                             "nimbus.verify.sandbox": "off"})
    made = [Contender(conf, name) for name in ("nimbus-a", "nimbus-b")]
    made[1].state.register_supervisor(NODE, {"node": NODE, "host": "127.0.0.1", "ports": PORTS, "time": 0})
    try:
        yield made
    finally:
        for contender in made:
            contender.close()


def test_a_leader_deposed_mid_round_writes_no_assignment(contenders: list[Contender],
                                                         zookeeper: DevZookeeper) -> None:
    a, b = contenders
    poll_for(lambda: a.election.is_leader, message="nimbus-a leads")
    # Given nimbus-a's assignment, written in its term and saying so
    add_topology(a.control, "words-1")
    term_a = a.election.fence
    assert term_a is not None
    written = a.state.assignment("words-1")
    assert written is not None and (written["writer"], written["term"]) == ("nimbus-a", term_a.term)
    # When nimbus-a's round is held past its term (a pause), its session expires (a
    # partition longer than the session timeout), and nimbus-b takes over and rebalances
    a.held = term_a
    expire(a.client, f"127.0.0.1:{zookeeper.port}")
    poll_for(lambda: b.election.is_leader, message="nimbus-b leads")
    b.control.reconcile("words-1", reschedule=True)
    poll_for(lambda: a.session.losses == 1 and not a.session.lost, message="nimbus-a back on a new session")
    by_b = b.state.assignment("words-1")
    term_b = b.election.fence
    assert by_b is not None and term_b is not None
    assert (by_b["writer"], by_b["term"], by_b["version"]) == ("nimbus-b", term_b.term, 2)
    assert term_b.term > term_a.term  # terms only grow: the token orders them
    # Then nimbus-a's writes in its ended term are refused (an API caller gets a 503),
    # and nimbus-b's assignment stands
    with pytest.raises(Unavailable) as refused:
        a.control.reconcile("words-1", reschedule=True)
    assert f"term {term_a.term} of nimbus-a has ended" in str(refused.value)
    with pytest.raises(NotLeader):
        a.state.remove_assignment("words-1", term_a)
    assert a.state.assignment("words-1") == by_b
    assert slots(a.control, "words-1") == [(NODE, p) for p in PORTS]
    # And so are its changes to the topology itself: a kill or a deactivation asked of it
    # is refused with a 503, and the record stays as it was
    record = a.state.topology("words-1")
    assert record is not None
    for change in (lambda: a.control.kill("words", 0),
                   lambda: a.control.set_status("words", "inactive")):
        with pytest.raises(Unavailable):
            change()
    assert b.state.topology("words-1") == record
    with pytest.raises(NotLeader):
        a.state.remove_topology("words-1", term_a)
    assert b.state.assignment("words-1") == by_b
    # And so is a submit: a 503 with nothing of it left (its code and secrets gone too), so
    # that the same submit, retried on the leader, is taken, not refused as a name in use
    before = {part: b.state.zk.get_children(b.state.path(part)) for part in ("topologies", "code", "secrets")}
    body = {"name": "fresh", "conf": {}, "topology": IdlePipeline.definition().to_dict()}
    with pytest.raises(Unavailable) as refused:
        a.submission.submit(body)
    assert "no longer the leader" in str(refused.value)
    assert {part: b.state.zk.get_children(b.state.path(part)) for part in before} == before
    taken = b.submission.submit(body)
    assert taken["name"] == "fresh" and b.state.topology(taken["id"]) is not None
