"""``squall`` subcommands for the cluster: daemons, submission and control."""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from squall.cli import tables
from squall.cli.client import NimbusClient
from squall.errors import ConfigError, SquallError
from squall.runtime.settings import config_path, forget_dev_cluster, load_conf, point_at_dev_cluster


def _conf(args: argparse.Namespace, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """A daemon's settings (nimbus, supervisor, the dev cluster itself)."""
    return load_conf(args.config, overrides)


def _client_conf(args: argparse.Namespace, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """A client command's settings: also the running dev cluster's, found without --config."""
    return load_conf(args.config, overrides, client=True)


def _client(conf: dict[str, Any]) -> NimbusClient:
    try:
        return NimbusClient.for_conf(conf)
    except ConfigError as e:
        if config_path(None, client=True) is not None:
            raise
        msg = ("no cluster to talk to: no squall.yaml was found (pass --config FILE, set $SQUALL_CONF, "
               f"or start `squall dev-cluster`, whose commands then find it)\n({e})")
        raise ConfigError(msg) from e


def _print(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True))


def cmd_nimbus(args: argparse.Namespace) -> int:
    from squall.nimbus.daemon import Nimbus
    from squall.runtime.daemons import run_foreground

    return run_foreground(Nimbus(_conf(args)), "nimbus")


def cmd_supervisor(args: argparse.Namespace) -> int:
    from squall.runtime.daemons import run_foreground
    from squall.supervisor.daemon import Supervisor

    return run_foreground(Supervisor(_conf(args)), "supervisor")


def cmd_dev_zookeeper(args: argparse.Namespace) -> int:
    from squall.cluster.zookeeper import DevZookeeper

    conf = _conf(args)
    port = args.port or conf["storm.zookeeper.port"]
    zk = DevZookeeper(port, args.dir, host=args.host or conf["storm.local.hostname"])
    zk.start()
    print(f"zookeeper serving on {zk.address}, data in {args.dir}; ^C to stop", flush=True)
    try:
        while zk.process is not None and zk.process.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        zk.stop()
    return 0


def cmd_dev_cluster(args: argparse.Namespace) -> int:
    """Until SIGTERM, SIGINT (^C) or SIGHUP: then stop everything it started,
    in order (see squall.cli.devcluster), and exit 0.  A SIGINT or SIGHUP
    ignored when it started (``nohup``, a script's ``&``) stays ignored."""
    import signal

    from squall.cli.devcluster import DevCluster

    cluster = DevCluster(Path(args.dir), supervisors=args.supervisors, slots=args.slots,
                         secure=not args.insecure)
    received: list[str] = []

    def handle(signum: int, frame: Any) -> None:
        received.append(signal.Signals(signum).name)
        cluster.stopping.set()  # only that: the main thread stops the cluster

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        if sig == signal.SIGTERM or signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, handle)
    dead: list[str] = []
    try:
        cluster.start()
        if not cluster.stopping.is_set():
            point_at_dev_cluster(cluster.config_file)  # client commands find it without --config
            secured = (f"secure: TLS, tokens, CURVE and ZooKeeper ACLs; keyring {cluster.keyring_file}\n"
                       if cluster.secure else "INSECURE: no TLS, no authentication (--insecure)\n")
            print(f"dev cluster up: nimbus {cluster.nimbus_url}, {args.supervisors} supervisors, "
                  f"DRPC server {cluster.drpc_url}.\n{secured}"
                  "use it with:  squall submit examples/wordcount.py   (squall list, info, kill, ...)\n"
                  "DRPC calls:   squall drpc-client FUNCTION ARGS\n"
                  "the web UI:   squall ui\n"
                  f"(its config, found by those commands while it runs: {cluster.config_file})\n"
                  "^C to stop everything", flush=True)
        while not cluster.stopping.wait(0.5):
            dead = cluster.dead()
            if dead:
                break
    finally:
        forget_dev_cluster(cluster.config_file)
        cluster.stop()
    if dead:
        print(f"dev cluster stopped: {', '.join(dead)} exited; see {cluster.root / 'logs'}",
              file=sys.stderr, flush=True)
        return 1
    print(f"dev cluster stopped ({received[0] if received else 'stop'})", flush=True)
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    from squall.cli.args import load_topology, parse_conf
    from squall.cli.packing import describe, plan, portable
    from squall.runtime.package import pack
    from squall.topology.class_check import verify_loadable

    conf = _client_conf(args)
    requirements = None
    if args.requirements:
        from squall.cli import environments

        requirements = environments.load(args.requirements)
    try:
        topology = load_topology(args.file, args.topology, filter=args.filter, env_filter=args.env_filter)
    except ModuleNotFoundError as e:
        if requirements is None or not requirements.lines:
            raise
        # The file imports its requirements at the top: read it where they are, in the
        # environment local mode runs it in (built once, then cached), as `local` does.
        print(f"{args.file} imports {e.name!r}: loading it in the environment of {args.requirements}",
              file=sys.stderr, flush=True)
        environments.run_in_environment(args.requirements, args.argv)
        raise  # run_in_environment returns only when this already is that environment
    # Every class loads here, with the whole error, before anything is sent: nimbus imports
    # the package only in a sandbox, where there is one, and tells less of what went wrong.
    verify_loadable(topology.definition())
    overrides = parse_conf(args.conf)
    topology_conf = {**topology.config, **overrides}
    configured = topology_conf.get("topology.package.include") or conf["topology.package.include"] or []
    package = plan(args.file, topology.definition(), topology_conf, args.root, [*configured, *args.include])
    code = pack(package.entries, conf["nimbus.code.max.bytes"],
                max_uncompressed_bytes=conf["nimbus.code.max.uncompressed.bytes"],
                max_entries=conf["nimbus.code.max.entries"], what=f"the code package of {args.file}")
    print(describe(package))
    for note in package.notes:
        print(f"note: {note}", file=sys.stderr)
    if args.dry_run:
        print(f"not submitted (--dry-run): {len(code):,} bytes zipped")
        return 0
    name = args.name or topology.__name__
    client = _client(conf)
    if requirements is not None and not requirements.lines:
        requirements = None  # all provided by Squall: nothing to build
    if requirements is not None:
        # Nimbus builds the environment before it answers: as long as a build may take.
        client.timeout = max(client.timeout, conf["supervisor.env.build.timeout.secs"] + 60)
        print(f"nimbus builds the environment of {requirements.source} unless it has it cached...",
              flush=True)
    result = client.submit(name, portable(topology.definition().to_dict(), package.root),
                           overrides, base64.b64encode(code).decode(),
                           requirements.to_record() if requirements is not None else None)
    if requirements is not None:
        print(environments.describe_remote(requirements, result.get("environment")))
    print(f"submitted topology {result['name']} (id {result['id']})")
    for warning in result.get("warnings") or []:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def cmd_kill(args: argparse.Namespace) -> int:
    result = _client(_client_conf(args)).kill(args.name, args.wait)
    print(f"killing topology {result['name']}: deactivated now, removed in {result['wait_secs']}s "
          "(squall list shows it as killing until then)")
    return 0


def cmd_action(args: argparse.Namespace) -> int:
    result = _client(_client_conf(args)).action(args.name, args.command)
    print(f"topology {result['name']}: {result['status']}")
    return 0


def cmd_rebalance(args: argparse.Namespace) -> int:
    from squall.cli.args import parse_conf

    try:
        executors = {k: int(v) for k, v in parse_conf(args.executors).items()}
    except ValueError as e:
        msg = f"-e/--executors takes COMPONENT=N with N a whole number: {e}"
        raise SquallError(msg) from e
    body = {"workers": args.workers, "executors": executors}
    if args.wait:
        body["wait_secs"] = args.wait
    result = _client(_client_conf(args)).action(args.name, "rebalance", body)
    if result.get("status") == "rebalancing":
        print(f"rebalancing topology {result['name']}: spouts deactivated for {result['wait_secs']} s "
              f"while the tuples in flight finish, then {result['workers']} workers")
    else:
        print(f"rebalanced topology {result['name']}: {result['workers']} workers")
    return 0


def cmd_autoscale(args: argparse.Namespace) -> int:
    from squall.cli import autoscale

    return autoscale.run(args, lambda: _client(_client_conf(args)), _print)


def cmd_metrics(args: argparse.Namespace) -> int:
    """Nimbus's ``GET /metrics`` (Prometheus's text format), with the keyring's token over TLS."""
    print(_client(_client_conf(args)).metrics_text(), end="")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    rows = _client(_client_conf(args)).list()
    if not rows:
        print("no topologies running")
        return 0
    print(f"{'name':<24}{'status':<10}{'workers':>8}{'executors':>10}{'uptime s':>10}  id")
    for r in rows:
        print(f"{r['name']:<24}{r['status']:<10}{r['workers']:>8}{r['executors']:>10}"
              f"{r['uptime_secs']:>10}  {r['id']}")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    client = _client(_client_conf(args))
    page = client.request("GET", f"topology/{quote(args.name, safe='')}?window={quote(args.window)}")
    if args.json:
        _print(page)
        return 0
    print(tables.topology_report(page))
    errors = client.info(args.name).get("errors") or []
    if errors:
        print()
        print(tables.errors_report(errors[-5:], traces=False))
        print("(their traces: squall errors " + args.name + ")")
    return 0


def cmd_monitor(args: argparse.Namespace) -> int:
    """Storm's ``storm monitor``: throughput every interval, from the all-time counters."""
    client = _client(_client_conf(args))
    path = f"topology/{quote(args.name, safe='')}?window=:all-time"
    shown = 0
    try:
        snapshots = tables.paced_snapshots(lambda: client.request("GET", path), args.interval,
                                           time.monotonic, time.sleep)
        for before, after, seconds in snapshots:
            print(tables.monitor_line(before, after, seconds, args.component), flush=True)
            shown += 1
            if args.count is not None and shown >= args.count:
                break
    except KeyboardInterrupt:
        pass
    return 0


def cmd_errors(args: argparse.Namespace) -> int:
    """Storm's ``storm get-errors``: the last errors of a topology's components, with
    each distinct trace once (``--brief``: the table only)."""
    print(tables.errors_report(_client(_client_conf(args)).info(args.name).get("errors") or [],
                               traces=not args.brief))
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    """The workers' logs of a topology, from the nodes' logviewers (squall.cli.logs)."""
    from squall.cli import logs

    conf = _client_conf(args)
    page = _client(conf).request("GET", f"topology/{quote(args.name, safe='')}")
    reader = logs.LogReader(conf)
    try:
        logs.show(reader, logs.worker_logs(page, args.component, args.events), args.component, args.grep,
                  args.follow, events=args.events)
    except KeyboardInterrupt:
        pass
    finally:
        reader.close()
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    """A component's workers' stacks or profiles, by py-spy on their nodes (squall.cli.profile)."""
    from squall.cli import profile

    conf = _client_conf(args)
    return profile.main(args, conf, _client(conf))


def add_command(sub: Any, name: str, func: Any, help_text: str,
                aliases: tuple[str, ...] = ()) -> argparse.ArgumentParser:
    """A cluster command's parser, reading ``--config`` after the command too."""
    p = sub.add_parser(name, help=help_text, aliases=list(aliases))
    # SUPPRESS: a --config given before the subcommand (squall --config F submit) is kept.
    p.add_argument("--config", default=argparse.SUPPRESS,
                   help="squall.yaml to read (default: $SQUALL_CONF or ./squall.yaml)")
    p.set_defaults(func=func)
    return p


def add_commands(sub: Any) -> None:
    def command(name: str, func: Any, help_text: str) -> argparse.ArgumentParser:
        return add_command(sub, name, func, help_text)

    command("nimbus", cmd_nimbus, "run a nimbus daemon in the foreground")
    command("supervisor", cmd_supervisor, "run a supervisor daemon in the foreground")
    p = command("dev-zookeeper", cmd_dev_zookeeper, "run the embedded single ZooKeeper server (Java 17)")
    p.add_argument("--port", type=int, default=None, help="default: storm.zookeeper.port")
    p.add_argument("--host", default=None,
                   help="the one address it listens on (default: storm.local.hostname, 127.0.0.1 unless set)")
    p.add_argument("--dir", default="squall-dev/zookeeper", help="data directory")
    p = command("dev-cluster", cmd_dev_cluster, "ZooKeeper, nimbus and supervisors on this machine")
    p.add_argument("--dir", default="squall-dev", help="where configs, logs and state go")
    p.add_argument("--supervisors", type=int, default=2)
    p.add_argument("--slots", type=int, default=2, help="worker slots per supervisor")
    p.add_argument("--insecure", action="store_true",
                   help="no TLS, tokens, CURVE or ZooKeeper ACLs (secure by default, like production)")
    p = command("submit", cmd_submit, "submit a topology file to the cluster")
    p.add_argument("file", help="a Python topology file, or a Flux .yaml file")
    p.add_argument("--name")
    p.add_argument("--topology", help="which Topology subclass, if the file has several")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--root", default=None, metavar="DIR",
                   help="the project's root: imported modules under it are packed, include patterns "
                        "and resources are relative to it (default: the topology file's directory)")
    p.add_argument("--include", action="append", default=[], metavar="PATH_OR_GLOB",
                   help="also pack these files (data, configs), relative to the root; '**/*.csv', "
                        "'data' (a directory); repeatable, added to topology.package.include")
    p.add_argument("--dry-run", action="store_true", help="print what would be packed, send nothing")
    from squall.cli.environments import REQUIREMENTS_HELP

    p.add_argument("--requirements", metavar="PATH", default=None, help=REQUIREMENTS_HELP)
    from squall.cli.flux import add_filter_flags

    add_filter_flags(p)
    p = command("kill", cmd_kill, "kill a topology (deactivate, wait, remove)")
    p.add_argument("name")
    p.add_argument("-w", "--wait", type=float, default=None,
                   help="seconds to drain (default: message timeout); -w as Storm's CLI")
    for action in ("activate", "deactivate"):
        command(action, cmd_action, f"{action} a topology's spouts").add_argument("name")
    p = command("rebalance", cmd_rebalance, "change a topology's worker count or parallelism")
    p.add_argument("name")
    # Storm's spellings too: storm rebalance NAME -w 10 -n 4 -e split=3
    p.add_argument("-n", "--workers", type=int, default=None, help="the new number of workers")
    p.add_argument("-e", "--executors", action="append", default=[], metavar="COMPONENT=N",
                   help="a component's new number of executors (repeatable)")
    p.add_argument("-w", "--wait", type=float, default=None,
                   help="seconds to deactivate the spouts and let the tuples in flight finish before moving "
                        "(Storm's -w; default: move at once)")
    from squall.cli.autoscale import add_arguments as autoscale_arguments

    autoscale_arguments(command("autoscale", cmd_autoscale,
                                "self-regulation: what it did and why (log), or switch it (enable, disable)"))
    command("list", cmd_list, "list running topologies")
    command("metrics", cmd_metrics, "print nimbus's /metrics (Prometheus's text format)")
    p = command("info", cmd_info, "a topology's components (rates, latencies, capacity), workers, errors")
    p.add_argument("name")
    p.add_argument("--window", default="600", help="600, 10800, 86400 or :all-time (default 600 s)")
    p.add_argument("--json", action="store_true", help="the Storm REST API's JSON, for scripts")
    p = command("monitor", cmd_monitor, "live throughput of a topology (Storm's monitor)")
    p.add_argument("name")
    p.add_argument("-c", "--component", help="one component only")
    p.add_argument("-i", "--interval", type=float, default=4.0, help="seconds between lines (default 4)")
    p.add_argument("--count", type=int, default=None, help="stop after this many lines")
    p = command("errors", cmd_errors, "the last errors of a topology's components, with their traces")
    p.add_argument("name")
    p.add_argument("--brief", action="store_true", help="the table only, no traces")
    from squall.cli.logs import add_arguments

    add_arguments(command("logs", cmd_logs, "a topology's workers' logs, from the nodes' logviewers"))
    from squall.cli import profile

    profile.add_arguments(command("profile", cmd_profile,
                                  "a component's workers' thread stacks (--dump) or a profile (--seconds N)"))
