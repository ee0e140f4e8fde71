"""``squall flux --dry-run FILE.yaml``: what a Flux file resolves to (its graph
and config, after filters and includes), without running it; and the
``--filter``/``--env-filter`` flags ``squall local`` and ``squall submit``
share with it."""

from __future__ import annotations

import argparse
from typing import Any

import yaml

from squall.topology.topology import TopologyDef


def add_filter_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--filter", default=None, metavar="FILE.properties",
                        help="(a .yaml topology) replace ${key} with the values of this properties file")
    parser.add_argument("--env-filter", action="store_true",
                        help="(a .yaml topology) replace ${ENV-NAME} with environment variable NAME")


def add_commands(sub: Any) -> None:
    p = sub.add_parser("flux", help="read a Flux YAML topology and print what it resolves to")
    p.add_argument("file", help="a Flux topology file (.yaml or .yml)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the graph and the resolved config, run nothing (the only mode: "
                        "run it with 'squall local FILE' or 'squall submit FILE')")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="topology config override, as for squall local/submit (repeatable)")
    add_filter_flags(p)
    p.set_defaults(func=cmd_flux)


def cmd_flux(args: argparse.Namespace) -> int:
    from squall.cli.args import parse_conf
    from squall.flux import load

    topology = load(args.file, filter=args.filter, env_filter=args.env_filter)
    defn = topology.definition()
    print(describe(defn, args.file, parse_conf(args.conf)), end="")
    return 0


def describe(defn: TopologyDef, file: str, overrides: dict[str, Any] | None = None) -> str:
    """The topology as text: components, the streams between them, the config."""
    lines = [f"topology {defn.name} (from {file})"]
    for kind in ("spout", "bolt"):
        members = [c for c in defn.components.values() if c.kind == kind]
        if not members:
            continue
        lines.append(f"{kind}s:")
        width = max(len(c.name) for c in members)
        for c in members:
            cls = c.to_dict()["class"]
            command = c.options.get("command")
            if command:
                cls += f" [{' '.join(str(part) for part in command)}]"
            streams = "; ".join(f"{s.name}({', '.join(s.fields)}){' direct' if s.direct else ''}"
                                for s in c.streams.values()) or "none"
            lines.append(f"  {c.name:<{width}}  {cls}  parallelism={c.par} tasks={c.tasks}  emits: {streams}")
    lines.append("streams:")
    edges = [(c, i) for c in defn.components.values() for i in c.inputs]
    for c, i in edges:
        grouping = i.grouping.type.upper()
        if i.grouping.fields:
            grouping += f"({', '.join(i.grouping.fields)})"
        if i.grouping.custom is not None:
            # a grouping built from a Flux recipe shows the user's class, not the wrapper
            recipe = i.grouping.args.get("recipe")
            custom = recipe["class"] if isinstance(recipe, dict) else i.grouping.to_dict()["custom"]
            grouping += f"({custom})"
        lines.append(f"  {i.component} --[{i.stream}: {grouping}]--> {c.name}")
    if not edges:
        lines.append("  none")
    conf = {**defn.config, **(overrides or {})}
    lines.append("config:")
    if conf:
        dumped = yaml.safe_dump(conf, default_flow_style=False, sort_keys=True)
        lines.extend(f"  {line}" for line in dumped.splitlines())
    else:
        lines.append("  {}")
    return "\n".join(lines) + "\n"
