"""Features that plug into the core without the core naming them.

A feature (or a package a user installs) declares what it adds as an entry
point in its pyproject.toml, under one of the groups below; the core looks
the group up when it needs it and loads only the entries it uses:

    [project.entry-points."squall.state_providers"]
    redis = "squall.contrib.redis.store:STATE_PROVIDER"

Groups:

- ``squall.state_providers``: a name for ``topology.state.provider`` ->
  a provider object (see squall.state.providers.StateProvider);
- ``squall.submit_checks``: a check nimbus and local mode run on every
  topology submitted (squall.worker.admission), ``check(plan, hosts) -> list
  of warnings``, raising ConfigError or TopologyValidationError to refuse it.
"""

from __future__ import annotations

import functools
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from squall.errors import ConfigError

STATE_PROVIDERS = "squall.state_providers"
SUBMIT_CHECKS = "squall.submit_checks"


@functools.cache
def declared(group: str) -> dict[str, EntryPoint]:
    """The entry points of ``group`` in every installed distribution, by name."""
    return {ep.name: ep for ep in entry_points(group=group)}


def load(group: str, name: str) -> Any:
    """The object entry point ``name`` of ``group`` names; ConfigError if none does."""
    found = declared(group).get(name)
    if found is None:
        msg = (f"no {group} entry point named {name!r} is installed "
               f"(installed: {sorted(declared(group)) or 'none'})")
        raise ConfigError(msg)
    return found.load()


def run_submit_checks(plan: Any, hosts: list[str], log: Any) -> list[str]:
    """Every installed submit check on a topology being submitted (nimbus, local mode):
    its refusal raises; its warnings are logged and returned."""
    from squall.config import misspelled

    warnings = []
    for text in misspelled(plan.conf):
        log.warning("submit check warning", check="config-keys", topology=plan.name, detail=text)
        warnings.append(text)
    for name, ep in sorted(declared(SUBMIT_CHECKS).items()):
        for text in ep.load()(plan, hosts):
            log.warning("submit check warning", check=name, topology=plan.name, detail=text)
            warnings.append(text)
    return warnings
