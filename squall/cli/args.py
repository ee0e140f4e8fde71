"""What several commands share: loading a topology file (Python or Flux) and ``--conf key=value``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import yaml

from squall.errors import SquallError
from squall.topology.topology import Topology


def load_topology(path: str, name: str | None = None, *, filter: str | None = None,  # noqa: A002
                  env_filter: bool = False) -> type[Topology]:
    """Import a topology file and pick its Topology subclass; a ``.yaml``/``.yml``
    file is a Flux definition (``filter``/``env_filter``: its substitutions)."""
    from squall import flux, plugins

    # What only code Squall runs may import (a streamparse project's ``streamparse``).
    plugins.add_import_roots()
    if flux.is_flux_file(path):
        if name is not None:
            msg = f"--topology picks a class of a Python file; {path} is a Flux file with one topology"
            raise SquallError(msg)
        return flux.load(path, filter=filter, env_filter=env_filter)
    if filter is not None or env_filter:
        msg = f"--filter and --env-filter apply to Flux (.yaml) files, not to {path}"
        raise SquallError(msg)
    file = Path(path).resolve()
    if not file.is_file():
        msg = f"no such topology file: {path}"
        raise SquallError(msg)
    module_name = file.stem
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        msg = f"cannot import {path} as Python"
        raise SquallError(msg)
    module = importlib.util.module_from_spec(spec)
    # Importable by name (so "module:Class" references resolve), and its
    # directory on the path (so it can import its neighbours).
    sys.modules[module_name] = module
    sys.path.insert(0, str(file.parent))
    spec.loader.exec_module(module)
    found = {obj.__name__: obj for obj in vars(module).values()
             if isinstance(obj, type) and issubclass(obj, Topology) and obj is not Topology
             and (obj.__module__ == module_name or getattr(obj, "built_by_streams", False))}
    found.update(_trident_topologies(module, module_name))
    if not found or name is not None:
        # A StreamBuilder the module did not build itself is one too (a name picks either).
        builders = _stream_builders(module, module_name)
        found.update({k: v for k, v in builders.items() if k not in found})
    if name is not None:
        if name not in found:
            msg = f"{path} defines no topology {name!r} (it defines: {sorted(found) or 'none'})"
            raise SquallError(msg)
        return found[name]
    if len(found) != 1:
        msg = (f"{path} defines {len(found)} topologies ({sorted(found)}); pick one with --topology"
               if found else f"{path} defines no Topology subclass")
        raise SquallError(msg)
    return next(iter(found.values()))


def _trident_topologies(module: Any, module_name: str) -> dict[str, type[Topology]]:
    """The TridentTopology instances a module defines at top level, built, by variable name.
    Each is built under ``<file stem>_<variable>``: its definition's name, which keys its
    state, differs from another file's ``topology = TridentTopology()``."""
    trident = sys.modules.get("squall.trident.stream")
    if trident is None:
        return {}  # the module made none: it never imported Trident
    return {name: obj.build(f"{module_name}_{name}") for name, obj in vars(module).items()
            if isinstance(obj, trident.TridentTopology)}


def _stream_builders(module: Any, module_name: str) -> dict[str, type[Topology]]:
    """The StreamBuilders a module binds at top level, built under ``<file stem>_<variable>``
    (the name their state is kept under), as a TridentTopology is."""
    streams = sys.modules.get("squall.streams.builder")
    if streams is None:
        return {}  # the module made none: it never imported the Streams API
    return {name: obj.build(f"{module_name}_{name}") for name, obj in vars(module).items()
            if isinstance(obj, streams.StreamBuilder)}


def parse_conf(pairs: list[str], flag: str = "--conf") -> dict[str, Any]:
    """``key=value`` pairs, each value read as YAML (``3`` an int, ``[a, b]`` a list)."""
    conf: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            msg = f"{flag} expects key=value, got {pair!r}"
            raise SquallError(msg)
        conf[key] = yaml.safe_load(value)
    return conf
