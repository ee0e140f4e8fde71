"""The worker's one entry: ``python -m squall.worker --dir WORKER_DIR``, as the supervisor launches it.

Parses the command line, sets up logging and the core the supervisor chose,
turns SIGTERM and SIGINT into an orderly stop, and runs a
:class:`~squall.worker.process.lifecycle.WorkerProcess` until it exits with one of the
contract's codes (:mod:`squall.worker.process.contract`, where the files in
WORKER_DIR are described).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
from pathlib import Path
from types import FrameType

import structlog

from squall.affinity import pin_to
from squall.runtime.log_levels import LogLevels
from squall.runtime.logging import configure_logging
from squall.worker.process.lifecycle import StartupError, WorkerProcess

log = structlog.get_logger("squall.worker.WorkerProcess")


def pin_to_core(cpu: str | None) -> None:
    """Pin this process to the core its supervisor chose, before any thread starts (threads inherit it)."""
    if not cpu:
        return
    try:
        pin_to(int(cpu))
    except (ValueError, OSError) as e:
        # A core the supervisor may not give (a cgroup shrank since): run unpinned, say so.
        log.warning("cannot pin the worker to its core", cpu=cpu, error=str(e))
        return
    log.info("worker pinned to a core", cpu=int(cpu))


def main(argv: list[str] | None = None) -> int:
    env = os.environ
    parser = argparse.ArgumentParser(prog="python -m squall.worker",
                                     description="Run one Squall worker (launched by the supervisor).")
    parser.add_argument("--dir", default=env.get("SQUALL_WORKER_DIR"), type=Path,
                        help="the worker directory holding assignment.json [env: SQUALL_WORKER_DIR]")
    parser.add_argument("--node", default=env.get("SQUALL_NODE") or socket.gethostname(),
                        help="this node's name, for logs [env: SQUALL_NODE; default: the hostname]")
    parser.add_argument("--launch", default=None,
                        help="the supervisor's token for this launch, told back in every heartbeat")
    parser.add_argument("--events-fd", type=int, default=None,
                        help="an open descriptor of the worker's events.log, where sampled tuples go "
                             "(the supervisor's; none: no event log)")
    parser.add_argument("--log-level", default=env.get("SQUALL_LOG_LEVEL", "info"),
                        help="debug, info, warning or error [env: SQUALL_LOG_LEVEL; default: info]")
    args = parser.parse_args(argv)
    if args.dir is None:
        parser.error("--dir is required")
    # Lines to read, as Storm's worker.log: a trace as the lines Python prints (JSON lines,
    # one event each with its trace escaped, for a log shipper: supervisor.worker.log.json).
    levels = LogLevels()  # squall set_log_level's, from assignment.json
    configure_logging(args.log_level, json=env.get("SQUALL_LOG_JSON") == "1", levels=levels)
    pin_to_core(env.get("SQUALL_WORKER_CPU"))
    process = WorkerProcess(args.dir, node=args.node, levels=levels, launch=args.launch,
                            events_fd=args.events_fd)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        process.post("signal", signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)
    try:
        process.start()
    except StartupError as e:
        return e.exit_code
    return process.run()


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Leave at once: threads of a dead worker may still be stuck in user code,
    # and nothing is left to clean up (the worker stopped, files are written).
    os._exit(code)
