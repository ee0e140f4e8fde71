"""``squall sparse``: streamparse's ``sparse`` commands, run in a streamparse project's
directory, on Squall -- ``run``, ``submit``, ``list``, ``kill``, ``tail`` and ``quickstart``.

Each reads the project (squall.cli.sparse_project) and runs Squall's own command with what
it found: ``run`` is ``squall local``, ``submit`` is ``squall submit`` with the project as
the code root and ``virtualenvs/NAME.txt`` as the requirements, ``tail`` is ``squall
logs``.  The project's ``src/`` goes on the path first, as streamparse packs it at the root
of the topology's jar.  streamparse's options keep their spellings (``-o``, ``-w``, ``-a``,
``-d``, ``-e``, ``-n``, ``-N``, ``-f``, ``-i``, ``--wait``); those about jars, SSH and fabric
are accepted and said to have no meaning here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from squall.cli import sparse_project as project_mod
from squall.errors import SquallError

# streamparse commands with no counterpart to run, and what to use instead.
OTHER_COMMANDS = {
    "jar": "there is no jar: `squall sparse submit` packs the Python code itself",
    "remote_jar": "there is no jar: `squall sparse submit` packs the Python code itself",
    "update_virtualenv": "`squall sparse submit` builds the topology's virtualenv on every supervisor",
    "remove_logs": "the supervisors remove old worker logs (logviewer.cleanup.age.mins)",
    "stats": "`squall info NAME` (or the UI) shows a topology's statistics",
    "slot_usage": "`squall list` and the UI's cluster page show slot usage",
    "worker_uptime": "`squall info NAME` shows each worker's uptime",
    "visualize": "the UI draws a topology's graph",
}


def _alias(key: str) -> Any:
    """An option that stands for ``-o key=value`` (streamparse's -w, -a, -d)."""
    def make(value: str) -> str:
        return f"{key}={value}"
    return make


def _add_common(p: argparse.ArgumentParser, *, name: bool = True) -> None:
    p.add_argument("--config", dest="project_config", metavar="CONFIG_JSON",
                   help="the project's config.json (default: ./config.json)")
    p.add_argument("-e", "--environment", help="which of config.json's envs (default: the only one)")
    if name:
        p.add_argument("-n", "--name", help="the topology (default: the only one in topologies/)")


def _add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--option", dest="options", action="append", default=[], metavar="KEY=VALUE",
                   help="a topology setting, e.g. -o topology.message.timeout.secs=60 (repeatable)")
    p.add_argument("-w", "--workers", dest="options", action="append", type=_alias("topology.workers"),
                   help="topology.workers")
    p.add_argument("-a", "--ackers", dest="options", action="append",
                   type=_alias("topology.acker.executors"), help="topology.acker.executors")
    p.add_argument("-d", "--debug", dest="options", action="append_const", const="topology.debug=true",
                   help="topology.debug")


def add_commands(sub: Any, squall_main: Callable[[list[str]], int]) -> None:
    """``squall_main``: the ``squall`` command itself, which each sparse command runs."""
    sparse = sub.add_parser("sparse", help="streamparse's sparse commands, in a streamparse project")
    sparse.set_defaults(squall_main=squall_main)
    cmds = sparse.add_subparsers(dest="sparse_command", required=True)
    run = cmds.add_parser("run", help="run the topology locally (squall local)")
    _add_common(run)
    _add_options(run)
    run.add_argument("-t", "--time", type=float, default=0,
                     help="seconds to run (default 0: until ^C)")
    run.set_defaults(func=cmd_run)
    submit = cmds.add_parser("submit", help="submit the topology to the cluster (squall submit)")
    _add_common(submit)
    _add_options(submit)
    submit.add_argument("-N", "--override_name", help="submit under this name instead of NAME")
    submit.add_argument("-f", "--force", action="store_true",
                        help="kill a running topology of that name first")
    submit.add_argument("-i", "--inactive", dest="active", action="store_false",
                        help="submit it deactivated (squall activate NAME starts it)")
    submit.add_argument("--wait", type=float, default=5, help="seconds a -f kill lets tuples drain (5)")
    submit.add_argument("-r", "--requirements", nargs="*", default=None,
                        help="the requirements file (default: virtualenvs/NAME.txt)")
    for flag, takes in (("-j", "--local_jar_path"), ("-R", "--remote_jar_path")):
        submit.add_argument(flag, takes, dest="ignored_" + takes[2:], help=argparse.SUPPRESS)
    for flag in ("--simple_jar", "--uber_jar", "--overwrite_virtualenv"):
        submit.add_argument(flag, dest="ignored_" + flag[2:], action="store_true", help=argparse.SUPPRESS)
    for flag in ("--pool_size", "--timeout", "--user"):
        submit.add_argument(flag, dest="ignored_" + flag[2:], help=argparse.SUPPRESS)
    submit.set_defaults(func=cmd_submit)
    listing = cmds.add_parser("list", help="the cluster's topologies (squall list)")
    _add_common(listing, name=False)
    listing.set_defaults(func=cmd_list)
    kill = cmds.add_parser("kill", help="kill the topology (squall kill)")
    _add_common(kill)
    kill.add_argument("--wait", type=float, default=5, help="seconds to let tuples drain (5)")
    kill.set_defaults(func=cmd_kill)
    tail = cmds.add_parser("tail", help="the topology's worker logs (squall logs)")
    _add_common(tail)
    tail.add_argument("-N", "--override_name", help="the name it was submitted under")
    tail.add_argument("-f", "--follow", action="store_true", help="keep printing what the logs gain")
    tail.add_argument("-l", "--num_lines", type=int, default=None, help="the last lines of each worker's log")
    tail.add_argument("--pattern", help=argparse.SUPPRESS)
    tail.set_defaults(func=cmd_tail)
    quick = cmds.add_parser("quickstart", help="a new streamparse project with its word count")
    quick.add_argument("project_name")
    quick.set_defaults(func=cmd_quickstart)
    for name, instead in OTHER_COMMANDS.items():
        other = cmds.add_parser(name, help=argparse.SUPPRESS)
        other.add_argument("rest", nargs=argparse.REMAINDER)
        other.set_defaults(func=_not_here(name, instead))


def _not_here(name: str, instead: str) -> Any:
    def refuse(args: argparse.Namespace) -> int:
        msg = f"`sparse {name}` has no counterpart on Squall: {instead}"
        raise SquallError(msg)
    return refuse


def _load(args: argparse.Namespace, *, local: bool = False) -> tuple[project_mod.Project, Any]:
    project = project_mod.load_project(".", args.project_config)
    options = project_mod.parse_options([o for o in args.options if o is not None])
    inv = project_mod.invocation(project, args.name, args.environment, options, local=local,
                                 requirements=getattr(args, "requirements", None),
                                 override_name=getattr(args, "override_name", None))
    ignored = sorted(k[len("ignored_"):] for k, v in vars(args).items()
                     if k.startswith("ignored_") and v not in (None, False))
    inv.notes += [f"--{flag} has no meaning on Squall (no jar, no SSH)" for flag in ignored]
    for note in inv.notes:
        print(f"note: {note}", file=sys.stderr)
    _source_first(project)
    return project, inv


def _source_first(project: project_mod.Project) -> None:
    """``src/`` on the path ahead of everything, then the project's root (a topology that
    imports ``src.bolts``, as streamparse's own examples do), here and in any process this
    one starts."""
    first = [str(project.source_dir), str(project.root)]
    for path in reversed(first):
        if path not in sys.path:
            sys.path.insert(0, path)
    current = os.environ.get("PYTHONPATH")
    joined = os.pathsep.join(first)
    os.environ["PYTHONPATH"] = joined if not current else f"{joined}{os.pathsep}{current}"


def _conf_flags(conf: dict[str, Any]) -> list[str]:
    flags: list[str] = []
    for key, value in conf.items():
        flags += ["--conf", f"{key}={json.dumps(value)}"]  # JSON is YAML: read back as it was
    return flags


def _squall(args: argparse.Namespace, argv: list[str], squall_config: str | None = None) -> int:
    """``squall ARGV``, with the environment's squall.yaml, else the one ``squall --config``
    was given."""
    config = squall_config or args.config
    return int(args.squall_main([*(["--config", config] if config else []), *argv]))


def _client(args: argparse.Namespace, inv: Any) -> Any:
    """A nimbus client on the cluster :func:`_squall`'s commands reach."""
    from squall.cli.client import NimbusClient
    from squall.runtime.settings import load_conf

    return NimbusClient.for_conf(load_conf(inv.squall_config or args.config, None, client=True))


def _requirements_flags(inv: Any) -> list[str]:
    return ["--requirements", str(inv.requirements)] if inv.requirements is not None else []


def cmd_run(args: argparse.Namespace) -> int:
    _project, inv = _load(args, local=True)
    argv = ["local", str(inv.file), "--name", inv.name, *_conf_flags(inv.conf), *_requirements_flags(inv)]
    if args.time and args.time > 0:
        argv += ["--duration", str(args.time)]
    return _squall(args, argv, inv.squall_config)


def cmd_submit(args: argparse.Namespace) -> int:
    project, inv = _load(args)
    if args.force and _running(args, inv):
        code = _squall(args, ["kill", inv.name, "-w", str(args.wait)], inv.squall_config)
        if code:
            return code
        _wait_gone(args, inv, args.wait + 60)
    code = _squall(args, ["submit", str(inv.file), "--name", inv.name, "--root", str(project.root),
                    *_conf_flags(inv.conf), *_requirements_flags(inv)], inv.squall_config)
    if code == 0 and not args.active:
        code = _squall(args, ["deactivate", inv.name], inv.squall_config)
    return code


def _running(args: argparse.Namespace, inv: Any) -> bool:
    return any(row["name"] == inv.name for row in _client(args, inv).list())


def _wait_gone(args: argparse.Namespace, inv: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _running(args, inv):
        if time.monotonic() > deadline:
            msg = f"topology {inv.name} is still being killed after {timeout:.0f} s: not submitted"
            raise SquallError(msg)
        time.sleep(0.5)


def _squall_config(args: argparse.Namespace) -> str | None:
    """The environment's squall.yaml, when config.json names one (no project needed otherwise)."""
    if args.project_config is None and not Path(project_mod.CONFIG_FILE).is_file():
        return None
    project = project_mod.load_project(".", args.project_config)
    return project_mod.squall_config_of(project, *project_mod.environment(project, args.environment))


def cmd_list(args: argparse.Namespace) -> int:
    return _squall(args, ["list"], _squall_config(args))


def _topology_name(args: argparse.Namespace) -> str:
    if getattr(args, "override_name", None):
        return str(args.override_name)
    project = project_mod.load_project(".", args.project_config)
    return project_mod.topology_file(project, args.name)[0]


def cmd_kill(args: argparse.Namespace) -> int:
    return _squall(args, ["kill", _topology_name(args), "-w", str(args.wait)], _squall_config(args))


def cmd_tail(args: argparse.Namespace) -> int:
    if args.num_lines is not None or args.pattern:
        print("note: -l and --pattern have no meaning on Squall: each worker's log is shown from its "
              "last 16 KiB", file=sys.stderr)
    follow = ["-f"] if args.follow else []
    return _squall(args, ["logs", _topology_name(args), *follow], _squall_config(args))


def cmd_quickstart(args: argparse.Namespace) -> int:
    from squall.cli.sparse_quickstart import FILES, quickstart

    root = quickstart(args.project_name, Path.cwd())
    print(f"created {root}:")
    for relative in FILES:
        print(f"  {args.project_name}/{relative}")
    print(f"\n  cd {args.project_name}\n  squall sparse run -t 10\n")
    return 0
