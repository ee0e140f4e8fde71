"""What ``squall submit`` packs, and what it prints about it.

:func:`squall.runtime.manifest.code_manifest` decides from files alone; this
module hands it what only the loaded topology knows -- the modules this
process imported and the files each shell component runs with -- and shows
the user the result: every file with its size and why it goes, and the
total.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from squall.errors import ConfigError, SquallError
from squall.runtime.manifest import (
    IMPORTED,
    INCLUDED,
    PACKAGE,
    RESOURCE,
    TOPOLOGY,
    Entry,
    Resource,
    code_manifest,
    loaded_modules,
    outside,
)
from squall.topology.topology import TopologyDef

RESOURCES_DIR_KEY = "topology.multilang.resources.dir"


@dataclass
class Plan:
    """A topology's package: its root, its files, and what the user should know."""

    root: Path
    entries: list[Entry]
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(e.size for e in self.entries)


def plan(topology_file: str, defn: TopologyDef, conf: dict[str, Any], root: str | None = None,
         include: Iterable[str] = ()) -> Plan:
    """The package of a topology loaded in this process (its classes imported).  ``conf``:
    the topology's config with the overrides, for where shell components run."""
    file = Path(topology_file).resolve()
    root_dir = Path(root).resolve() if root is not None else file.parent
    resources, notes = shell_resources(defn, conf, root_dir)
    modules = loaded_modules()
    entries = code_manifest(file, root_dir, include, modules=modules, resources=resources)
    notes += [f"module {name!r} ({path}) is imported but lies outside the project root {root_dir}: "
              "not packed (install it on the cluster's machines, or set --root above it)"
              for name, path in sorted(outside(modules, root_dir).items())]
    return Plan(root_dir, entries, notes)


def shell_resources(defn: TopologyDef, conf: dict[str, Any], root: Path) -> tuple[list[Resource], list[str]]:
    """What each shell component runs with, as Storm ships a jar's ``resources/``: its working
    directory whole when that is a directory of its own (``resources/``, ``cwd=``), else the
    files its command line names there (the script)."""
    from squall.multilang.base import ShellComponent
    from squall.multilang.settings import command_line, working_dir
    from squall.topology.loading import resolve_class

    found: list[Resource] = []
    notes: list[str] = []
    for cdef in defn.components.values():
        cls = resolve_class(cdef.cls)
        if not (isinstance(cls, type) and issubclass(cls, ShellComponent)):
            continue
        options = cls.launch_options(dict(cdef.options))
        base = Path(os.path.abspath(options.get("defined_in") or os.getcwd()))
        configured = conf.get(RESOURCES_DIR_KEY)
        if configured and not options.get("cwd") and not os.path.isabs(str(configured)):
            # On the cluster a worker runs in its unpacked package: relative to the root.
            options = {**options, "cwd": os.path.relpath(root / str(configured), base)}
        cwd = Path(os.path.abspath(working_dir(options, conf)))
        if cwd != root and root not in cwd.parents:
            notes.append(f"component {cdef.name!r} runs in {cwd}, outside the project root: nothing "
                         "of it is packed (that directory must exist on the cluster's machines)")
            continue
        if not cwd.is_dir():
            msg = f"component {cdef.name!r} runs in {cwd}, which is not a directory"
            raise SquallError(msg)
        if cwd != base and cwd not in base.parents and cwd != root:
            found.append(Resource(cwd, cdef.name))
            continue
        try:
            argv = command_line(options, cdef.name)
        except ConfigError:
            continue  # the definition's own checks say so
        for arg in argv:
            path = Path(os.path.abspath(cwd / arg))
            if path.is_file() and root in path.parents:
                found.append(Resource(path, cdef.name))
    return found, notes


WHY = {
    TOPOLOGY: "the topology",
    IMPORTED: "imported ({})",
    PACKAGE: "package ({}) of an imported module",
    RESOURCE: "resource of {}",
    INCLUDED: "included by {!r}",
}


def describe(package: Plan) -> str:
    """The manifest as printed at submit: each file, its size and why it goes; the total."""
    entries = package.entries
    lines = [f"code package from {package.root}:"]
    width = max((len(e.path) for e in entries), default=0)
    size_width = max((len(f"{e.size:,}") for e in entries), default=0)
    lines += [f"  {e.size:>{size_width},}  {e.path:<{width}}  {WHY[e.why].format(e.detail)}" for e in entries]
    files = f"{len(entries)} file" + ("" if len(entries) == 1 else "s")
    lines.append(f"  total: {files}, {package.total:,} bytes "
                 "(add files with --include PATTERN or topology.package.include)")
    return "\n".join(lines)


def portable(definition: dict[str, Any], root: Path) -> dict[str, Any]:
    """Paths of this machine in component options (where a shell component's
    spec was written) made relative to the code package: on the cluster the
    package is unpacked elsewhere, and workers run in its directory."""
    for component in definition["components"]:
        options = component.get("options") or {}
        where = options.get("defined_in")
        if isinstance(where, str) and Path(where).is_absolute():
            try:
                options["defined_in"] = Path(where).relative_to(root).as_posix() or "."
            except ValueError:
                pass  # outside the package: left as it is
    return definition
