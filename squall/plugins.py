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
  topology submitted (squall.nimbus.admission), ``check(plan, hosts) -> list
  of warnings``, raising ConfigError or TopologyValidationError to refuse it;
- ``squall.import_roots``: a directory (a str) put first on the import path of
  every process that imports a topology's code -- the worker, ``squall local`` and
  ``submit`` loading a file, nimbus's verifier -- and nowhere else: packages only
  that code may import (squall.compat.streamparse's ``streamparse``).
"""

from __future__ import annotations

import functools
import sys
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from squall.errors import ConfigError

STATE_PROVIDERS = "squall.state_providers"
SUBMIT_CHECKS = "squall.submit_checks"
IMPORT_ROOTS = "squall.import_roots"


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


def add_import_roots(path: list[str] | None = None) -> list[str]:
    """Put every installed import root first on ``path`` (``sys.path``), once; the roots.

    First, before site-packages: a topology's own environment may hold the library a
    root stands in for (a streamparse project's virtualenv has streamparse), whose
    classes Squall cannot run in-process.  Callers then put the topology's own
    directory before them.
    """
    target = sys.path if path is None else path
    roots = []
    for _name, ep in sorted(declared(IMPORT_ROOTS).items()):
        root = str(ep.load())
        if root not in target:
            target.insert(0, root)
        roots.append(root)
    return roots


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
