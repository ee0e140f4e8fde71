"""What nimbus checks when a checkpointed topology is submitted.

A stateful bolt task restores its state from the store wherever it runs
next.  A node-local store (an SQLite file, a worker's memory) is only there
on the machine that wrote it: if the topology's workers may land on several
hosts, a task that moves loses its state.  Nimbus refuses that at submit.
Workers are placed (and moved when a node dies) after submission, so the
check is the cautious one: a cluster whose supervisors run on more than one
host.  One worker is no exception: when its node dies nimbus moves it to
another host, where the store is empty, while the checkpoint record in
ZooKeeper says where the spout resumes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from squall.errors import ConfigError
from squall.state.providers import check_state_conf, provider_of

CHECKPOINT_SPOUT_CLASS = "squall.state.spout:CheckpointSpout"


def is_checkpointed_definition(components: Iterable[Any]) -> bool:
    """Whether a topology (its ComponentDefs) was rewritten for checkpointed state."""
    from squall.topology.grouping import class_path

    return any(c.cls is not None and class_path(c.cls) == CHECKPOINT_SPOUT_CLASS for c in components)


def check_submission(plan: Any, hosts: Iterable[str]) -> list[str]:
    """Raise ConfigError (nimbus answers 400) for state this cluster cannot keep
    (a submit check: see squall.plugins)."""
    conf = plan.conf
    if not is_checkpointed_definition(plan.components.values()):
        return []
    check_state_conf(conf)  # the submit's overrides may have changed the interval or timeout
    provider = provider_of(conf)
    hosts = sorted(set(hosts))
    workers = conf.get("topology.workers", 1)
    if provider.node_local and len(hosts) > 1:
        what = f"topology's {workers} workers" if workers > 1 else "topology's worker"
        msg = (f"topology.state.provider is {provider.name}, which keeps state on one machine, but this "
               f"{what} may run on several hosts ({', '.join(hosts)}): a task "
               "that moves would lose its state; use a networked store: topology.state.provider: "
               'redis with topology.state.provider.config {"url": "redis://HOST:PORT"}')
        raise ConfigError(msg)
    return []
