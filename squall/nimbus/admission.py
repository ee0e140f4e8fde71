"""What a topology must pass to be submitted: one set of checks for nimbus and
local mode alike, so that a conf local mode accepts is one a cluster accepts,
and a conf either refuses is refused at submit with a message naming the key,
not by a worker crash-looping on it later.

Nimbus also imports the topology's code in a sandbox (squall.nimbus.package_verifier),
where local mode imports it in its own process (squall.topology.class_check); both
then call :func:`plan_submission`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from squall import config as config_mod
from squall import plugins
from squall.errors import ConfigError, TopologyValidationError
from squall.nimbus.placement import colocations
from squall.security.admission import MAX_NAME, check_id
from squall.topology import resources
from squall.topology.topology import TopologyDef, check_topology_resources
from squall.worker.plan import TopologyPlan, plan_topology

# The caps a cluster puts on one submit (Storm's nimbus.slots.perTopology and
# nimbus.executors.perTopology; tasks is Squall's).
SIZE_LIMITS = (("workers", "nimbus.slots.perTopology"), ("executors", "nimbus.executors.perTopology"),
               ("tasks", "nimbus.tasks.perTopology"))


def check_name(name: Any) -> None:
    """A topology's name becomes a ZooKeeper node, a directory and a URL path segment
    (squall.security.admission's one pattern for names and ids)."""
    check_id("topology name", name)
    if len(name) > MAX_NAME:
        msg = f"topology name {name!r} is over {MAX_NAME} characters (its id adds 18)"
        raise TopologyValidationError(msg)


def check_size(defn: TopologyDef, conf: Mapping[str, Any], limits: Mapping[str, Any]) -> None:
    """Refuse what would exhaust the cluster (or nimbus, planning it) before planning it.
    ``conf``: the topology's own settings merged; ``limits``: the cluster's config."""
    workers = conf.get("topology.workers", 1)
    ackers = conf.get("topology.acker.executors")
    extra = ackers if ackers is not None else workers
    asked = {"workers": workers,
             "executors": sum(c.par for c in defn.components.values()) + extra,
             "tasks": sum(c.tasks for c in defn.components.values()) + extra}
    for what, key in SIZE_LIMITS:
        cap = limits.get(key, config_mod.DEFAULTS[key])
        n = asked[what]
        if isinstance(n, int) and n > cap:
            msg = f"the topology asks for {n} {what}, over this cluster's {key} ({cap})"
            raise TopologyValidationError(msg)


def check_resources(plan: TopologyPlan, raw_conf: Mapping[str, Any]) -> None:
    """Each component's declared memory and CPU and the topology's worker maximum
    (squall.topology.resources: numbers, not negative, not absurd), and no executor needing
    more than a worker may hold, which no cluster could schedule."""
    check_topology_resources(raw_conf, "the topology's conf")
    for name, component in plan.components.items():
        where = f"component {name!r}"
        for key in resources.COMPONENT_KEYS:
            if key in component.config:
                resources.check(key, component.config[key], where)
    if not resources.resource_aware(raw_conf, (c.config for c in plan.components.values())):
        return
    max_heap = resources.worker_max(plan.conf)
    for name, component in sorted(plan.components.items()):
        need = resources.need_of(component.config, plan.conf, f"component {name!r}")
        if need.memory > max_heap:
            msg = (f"component {name!r} declares {need.memory:g} MB per executor, over "
                   f"{resources.WORKER_MAX_HEAP} ({max_heap:g} MB): no worker could hold one")
            raise TopologyValidationError(msg)


def plan_submission(name: Any, defn: TopologyDef, conf: Any, hosts: list[str], log: Any,
                    base: Mapping[str, Any] | None = None,
                    limits: Mapping[str, Any] | None = None) -> tuple[TopologyPlan, list[str]]:
    """Check a topology submitted as ``name`` with ``conf`` (the submit's overrides) and
    plan it: its name, the types of its config (its own and ``conf``), its size against
    ``limits`` (a cluster's; None: no caps), then every feature's submit check
    (squall.plugins: checkpointed state's interval against the message timeout, a
    node-local store across ``hosts``, ...) on the merged config, ``base`` (the cluster's
    settings) under the topology's own under ``conf``.  Raises TopologyValidationError or
    ConfigError naming what is wrong; returns the plan and the checks' warnings."""
    check_name(name)
    # The definition's name keys its checkpointed state (a directory, a znode).
    check_id("the topology definition's name", defn.name)
    if not isinstance(conf, Mapping):
        msg = f"a topology's conf must be a JSON object of config keys, got {type(conf).__name__}: {conf!r}"
        raise ConfigError(msg)
    config_mod.validate(defn.config)
    config_mod.validate(conf)
    if limits is not None:
        check_size(defn, {**(base or {}), **defn.config, **conf}, limits)
    plan = plan_topology(defn, base, dict(conf))
    check_resources(plan, {**defn.config, **conf})
    problems = colocations(plan)[1]
    if problems:
        raise TopologyValidationError(problems[0])
    warnings = plugins.run_submit_checks(plan, hosts, log)
    return plan, warnings
