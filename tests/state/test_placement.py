"""Nimbus's submit check: node-local state refused when workers may span hosts."""

from __future__ import annotations

from typing import Any

import pytest

from squall import Spout, Topology
from squall.errors import ConfigError
from squall.state import StatefulBolt
from squall.state.placement import check_submission
from squall.topology.topology import definition_from_dict
from squall.worker.plan import plan_topology

pytestmark = pytest.mark.timeout(10)


class Words(Spout):
    outputs = ["word"]


class Count(StatefulBolt):
    def init_state(self, state: Any) -> None:
        self.state = state


class Stateful(Topology):
    words = Words.spec()
    count = Count.spec(inputs=[words])


class Plain(Topology):
    words = Words.spec()


def submitted(topology: type[Topology], conf: dict[str, Any]) -> Any:
    # As nimbus sees it: rebuilt from the submitted JSON, classes as paths, planned with the overrides.
    return plan_topology(definition_from_dict(topology.definition().to_dict()), overrides=conf)


def conf(**kw: Any) -> dict[str, Any]:
    return {"topology.workers": 4, "topology.message.timeout.secs": 30,
            "topology.state.checkpoint.interval.ms": 1000, **kw}


@pytest.mark.parametrize("provider", ["sqlite", "memory"])
def test_node_local_state_across_hosts_is_refused_naming_redis(provider: str) -> None:
    with pytest.raises(ConfigError, match=r"keeps state on one machine.*hosts \(a, b\).*redis"):
        check_submission(submitted(Stateful, conf(**{"topology.state.provider": provider})), ["a", "b", "a"])


def test_one_worker_across_hosts_is_refused_too() -> None:
    # When its node dies nimbus moves it to another host, where the SQLite file is not
    with pytest.raises(ConfigError, match=r"this topology's worker may run on several hosts \(a, b\)"):
        check_submission(submitted(Stateful, conf(**{"topology.workers": 1})), ["a", "b"])


def test_what_is_allowed() -> None:
    check_submission(submitted(Stateful, conf()), ["a", "a"])  # one host: SQLite shared by its workers
    redis = {"topology.state.provider": "redis", "topology.state.provider.config": '{"url": "redis://h:1"}'}
    check_submission(submitted(Stateful, conf(**redis)), ["a", "b"])
    check_submission(submitted(Plain, conf()), ["a", "b"])  # no state at all


def test_submit_overrides_are_checked_too() -> None:
    with pytest.raises(ConfigError, match=r"must be below topology\.message\.timeout\.secs"):
        check_submission(submitted(Stateful, conf(**{"topology.message.timeout.secs": 1})), ["a"])
