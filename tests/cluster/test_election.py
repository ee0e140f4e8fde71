"""squall.cluster's coordination interface on a real ZooKeeper: leader election
(one leader at a time, a lost session ends a term, a recovered one runs again)
and stoppable watches."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from squall import config as config_mod
from squall.cluster.election import LeaderElection
from squall.cluster.session import CONNECTED, LOST, Session
from squall.cluster.watches import ChildrenWatch, DataWatch
from squall.cluster.zookeeper import DevZookeeper, disconnect, start_client
from squall.testing import poll_for

PATH = "/test/election"


@pytest.fixture
def clients(zookeeper: DevZookeeper) -> Iterator[list[Any]]:
    conf = config_mod.merge({"storm.zookeeper.port": zookeeper.port, "squall.secure": False})
    made = [start_client(conf) for _ in range(2)]
    yield made
    for client in made:
        disconnect(client)


class Contender:
    def __init__(self, client: Any, name: str, recover: Callable[[], None] | None = None) -> None:
        self.session = Session(client, name, recover=recover)
        self.session.start()
        self.changes: list[bool] = []
        self.election = LeaderElection(client, PATH, name, self.session, self.changes.append)
        self.election.start()

    def stop(self) -> None:
        self.election.stop()
        self.election.join(10)


def test_one_leader_at_a_time_and_the_next_takes_over(clients: list[Any]) -> None:
    first = Contender(clients[0], "first")
    try:
        poll_for(lambda: first.election.is_leader, message="the first contender leads")
        second = Contender(clients[1], "second")
        try:
            poll_for(lambda: second.election.leader() == "first", message="the second sees the leader")
            assert not second.election.is_leader and second.changes == []
            # When the leader leaves, the other one leads
            first.stop()
            poll_for(lambda: second.election.is_leader, message="the second contender leads")
            assert first.changes == [True, False] and first.election.terms == 1
            assert second.election.leader() == "second"
        finally:
            second.stop()
    finally:
        first.stop()


def test_a_lost_session_ends_the_term_and_a_recovered_one_runs_again(clients: list[Any]) -> None:
    recovered = threading.Event()
    contender = Contender(clients[0], "only", recover=recovered.set)  # the daemon's re-registration
    try:
        poll_for(lambda: contender.election.is_leader, message="leading")
        # When kazoo reports the session lost, and reconnected before the leader looks
        contender.session.handle(LOST)
        contender.session.handle(CONNECTED)
        # Then the recovery runs, the term ends, and a second one begins
        poll_for(recovered.is_set, message="the recovery ran")
        poll_for(lambda: contender.election.terms == 2 and contender.election.is_leader, message="a new term")
        # The flag goes up before the callback runs on the election thread, so wait for the callback too
        poll_for(lambda: len(contender.changes) >= 3, message="the new term's callback")
        assert contender.changes == [True, False, True]
    finally:
        contender.stop()
    assert contender.changes == [True, False, True, False]


def test_watches_follow_changes_until_stopped(clients: list[Any]) -> None:
    client = clients[0]
    client.ensure_path("/test/watched")
    children: list[list[str]] = []
    data: list[bytes | None] = []
    children_watch = ChildrenWatch(client, "/test/watched", lambda c: children.append(sorted(c)))
    data_watch = DataWatch(client, "/test/watched/a", data.append)
    assert children == [[]] and data == [None]
    client.create("/test/watched/a", b"1")
    poll_for(lambda: children[-1] == ["a"] and data[-1] == b"1", message="both watches fired")
    children_watch.stop()
    data_watch.stop()
    # Watches that go on show when kazoo has dealt with the changes that follow
    later_children: list[list[str]] = []
    later_data: list[bytes | None] = []
    ChildrenWatch(client, "/test/watched", lambda c: later_children.append(sorted(c)))
    DataWatch(client, "/test/watched/a", later_data.append)
    seen = (list(children), list(data))
    client.set("/test/watched/a", b"2")
    client.create("/test/watched/b")
    poll_for(lambda: later_children[-1] == ["a", "b"] and later_data[-1] == b"2", message="the changes seen")
    # Then the stopped watches were not called again
    assert (children, data) == seen
