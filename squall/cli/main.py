"""The ``squall`` command line, mirroring Storm's.

    squall local examples/wordcount.py --duration 10
    squall local examples/wordcount.py --ui --ui-port 8080    # and the web UI
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from squall.cli.args import load_topology, parse_conf
from squall.cli.tables import trace_site
from squall.errors import SquallError
from squall.local.cluster import LocalCluster
from squall.runtime.logging import configure_logging
from squall.version import VERSION

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_ERROR = 1

Shown = tuple[int, set[tuple[str, str]]]  # local mode: errors looked at, (component, trace) printed


def format_stats(stats: dict[str, dict[str, Any]], elapsed: float,
                 previous: dict[str, dict[str, Any]] | None = None) -> str:
    """The local run's table; acked/s over the ``elapsed`` seconds since ``previous``
    (the last table's stats: the current rate, not the mean since the start)."""
    lines = [(f"{'component':<16}{'emitted':>12}{'executed':>12}{'acked':>12}{'failed':>10}"
              f"{'acked/s':>11}{'lat p50 ms':>12}{'p99 ms':>9}{'timed out':>11}")]
    for name in sorted(stats):
        s = stats[name]
        lat = s.get("complete_latency_ms")
        p50 = f"{lat['p50']:.2f}" if lat else "-"
        p99 = f"{lat['p99']:.2f}" if lat else "-"
        before = ((previous or {}).get(name) or {}).get("acked", 0)
        rate = (s["acked"] - before) / elapsed if elapsed > 0 else 0.0
        # of failed, the trees that timed out (a spout's): the rest a bolt failed
        timed_out = s.get("timed_out", 0) if not s.get("executed") and not name.startswith("__") else "-"
        lines.append(f"{name:<16}{s['emitted']:>12}{s['executed']:>12}{s['acked']:>12}{s['failed']:>10}"
                     f"{rate:>11.0f}{p50:>12}{p99:>9}{timed_out:>11}")
    return "\n".join(lines)


def pin_local(cpu: str) -> None:
    """Local mode is one process, one GIL: pinned to one core its threads stop trading cores
    (the word count runs 10-20% faster).  Multilang children and a Spark server keep every core."""
    if cpu == "none":
        return
    from squall.affinity import least_busy_core, pin_to

    core = least_busy_core() if cpu == "auto" else int(cpu)
    if core is None:
        return
    try:
        pin_to(core)
    except OSError as e:
        msg = f"cannot pin local mode to core {core}: {e} (--cpu none runs unpinned)"
        raise SquallError(msg) from e


def cmd_local(args: argparse.Namespace) -> int:
    if args.requirements:
        from squall.cli.environments import run_in_environment

        run_in_environment(args.requirements, args.argv)  # returns once running in the environment
    topology = load_topology(args.file, args.topology, filter=args.filter, env_filter=args.env_filter)
    conf = parse_conf(args.conf)
    name = args.name or topology.__name__
    pin_local(args.cpu)
    with LocalCluster() as cluster:
        runner = cluster.submit(name, topology, conf)
        server = None
        if args.ui:
            from squall.local.ui import LocalUiServer  # the HTTP stack only when asked for

            try:
                server = LocalUiServer(cluster, "127.0.0.1", args.ui_port).start()
            except OSError as e:
                msg = f"cannot serve the UI on 127.0.0.1:{args.ui_port}: {e}"
                raise SquallError(msg) from e
            print(f"UI at {server.sign_in_url}", flush=True)  # the token: only who ran it may use it
        start = time.monotonic()
        deadline = None if args.duration is None else start + args.duration
        shown: Shown = (0, set())
        last: tuple[dict[str, dict[str, Any]], float] = ({}, 0.0)  # the last table's stats, and when
        try:
            while deadline is None or time.monotonic() < deadline:
                time.sleep(args.interval if deadline is None
                           else max(0.0, min(args.interval, deadline - time.monotonic())))
                elapsed = time.monotonic() - start
                if name not in cluster.topologies():  # killed from the UI
                    print(f"--- {name} was killed", flush=True)
                    break
                print(f"--- {name} after {elapsed:.1f}s", flush=True)
                stats = runner.stats()
                print(format_stats(stats, elapsed - last[1], last[0]), flush=True)
                last = (stats, elapsed)
                shown = _print_new_traces(runner.errors, shown)
        except KeyboardInterrupt:
            pass
        finally:
            if server is not None:
                server.stop()
        errors = list(runner.errors)
        # Failed at the spouts: each a tuple tree that failed (a bolt's fail or a timeout).
        spouts = {name for name, c in runner.plan.components.items() if c.kind == "spout"}
        failed = sum(s.get("failed", 0) for c, s in runner.stats().items() if c in spouts)
        if name in cluster.topologies():
            cluster.kill(name)
    if errors:
        shown = _print_new_traces(errors, shown)
        fatal = sum(e.fatal for e in errors)
        print(f"{len(errors)} component errors reported ({fatal} fatal; at most "
              f"topology.max.error.report.per.interval an interval), {len(shown[1])} distinct (traces "
              f"above), {failed:,} tuples failed; the first: {errors[0].error}")
    return EXIT_OK


def _print_new_traces(errors: list[Any], shown: Shown) -> Shown:
    """Each error reported since the last look whose trace was not printed yet, with its
    trace: a bolt raising on every tuple prints it once, not once a tuple."""
    seen, printed = shown
    for e in list(errors)[seen:]:
        key = (e.component, trace_site(e.trace))
        if key in printed:
            continue
        printed.add(key)
        fatal = "fatal (the worker restarted) " if e.fatal else ""
        print(f"--- {fatal}error in {e.component}, task {e.task}: {e.error}", flush=True)
        print("\n".join("    " + line for line in e.trace.rstrip().splitlines()), flush=True)
    return len(errors), printed


def _cpu_choice(value: str) -> str:
    if value in ("auto", "none") or value.isdigit():
        return value
    msg = f"--cpu takes a core number, auto or none, not {value!r}"
    raise argparse.ArgumentTypeError(msg)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="squall", description="Storm's model, in Python.")
    from squall import compiled

    hot = f"hot path compiled: {compiled.current()} of {len(compiled.MODULES)} modules"
    parser.add_argument("--version", action="version", version=f"squall {VERSION} ({hot})")
    parser.add_argument("--log-level", default="warning", help="debug, info, warning, error")
    parser.add_argument("--config", default=None,
                        help="squall.yaml of the cluster commands (also accepted after the command)")
    sub = parser.add_subparsers(dest="command", required=True)
    local = sub.add_parser("local", help="run a topology file in local mode (one process)")
    local.add_argument("file", help="a Python file defining a Topology subclass, or a Flux .yaml file")
    local.add_argument("--topology", help="which Topology subclass, if the file has several")
    local.add_argument("--name", help="topology name (default: the class name)")
    local.add_argument("--duration", type=float, default=None, help="seconds to run (default: until ^C)")
    local.add_argument("--interval", type=float, default=1.0, help="seconds between stats lines")
    local.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                       help="topology config override, e.g. topology.workers=2 (repeatable)")
    local.add_argument("--cpu", default="auto", type=_cpu_choice,
                       help="the core to pin the process to: a number, auto (the idlest; default) or none")
    local.add_argument("--ui", action="store_true",
                       help="serve the web UI and Storm's UI REST API from this process")
    local.add_argument("--ui-port", type=int, default=8080,
                       help="the UI's port on 127.0.0.1 (default 8080; 0: any free port)")
    from squall.cli.environments import REQUIREMENTS_HELP

    local.add_argument("--requirements", metavar="PATH", default=None, help=REQUIREMENTS_HELP)
    from squall.cli import flux as flux_command

    flux_command.add_filter_flags(local)
    local.set_defaults(func=cmd_local)
    from squall.cli import cluster as cluster_cli
    from squall.cli import debug as debug_cli
    from squall.cli import drpc as drpc_cli
    from squall.cli import log_levels as log_levels_cli
    from squall.cli import secrets as secrets_cli
    from squall.cli import sparse as sparse_cli

    flux_command.add_commands(sub)
    cluster_cli.add_commands(sub)
    log_levels_cli.add_commands(sub)
    debug_cli.add_commands(sub)
    drpc_cli.add_commands(sub)
    secrets_cli.add_commands(sub)
    sparse_cli.add_commands(sub, main)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what local --requirements runs again
    configure_logging(args.log_level)
    try:
        return int(args.func(args))
    except SquallError as e:
        print(f"squall: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        # `squall info X | head`: the reader has what it wanted; no traceback for that.
        # (stdout goes to /dev/null so that Python's flush at exit does not raise again)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
