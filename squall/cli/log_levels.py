"""``squall set_log_level`` (Storm's spelling; ``set-log-level`` too): change the log levels of
a topology's running workers, for a while or until reset, through Storm's
``/api/v1/topology/:id/logconfig`` (names and levels: squall.runtime.log_levels)::

    squall set_log_level -l ROOT=DEBUG:30 wordcount     # everything at DEBUG for 30 s
    squall set_log_level -l split=DEBUG wordcount       # split's own logger, until reset
    squall set_log_level -r split wordcount             # split back to the workers' own level
    squall set_log_level wordcount                      # what is set now
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any
from urllib.parse import quote

from squall.cli.cluster import _client, _client_conf, add_command
from squall.runtime.log_levels import STORM_LEVELS, level_number, logger_name, timeout_secs


def log_setting(text: str) -> tuple[str, str, int]:
    """``-l NAME=LEVEL[:SECS]`` -> (name, level, timeout secs; 0: until reset)."""
    name, equals, rest = text.partition("=")
    level, colon, secs = rest.partition(":")
    try:
        if not equals or not level:
            msg = "expected NAME=LEVEL[:SECONDS], e.g. ROOT=DEBUG:30 or split=DEBUG"
            raise ValueError(msg)
        name = logger_name(name)
        level_number(level)
        if colon and not secs.isdigit():
            msg = f"the timeout {secs!r} is not a whole number of seconds"
            raise ValueError(msg)
        return name, level.upper(), timeout_secs(int(secs) if colon else 0)
    except ValueError as e:
        msg = f"{text!r}: {e}"
        raise argparse.ArgumentTypeError(msg) from e


def log_reset(text: str) -> str:
    """``-r NAME``: a name whose level goes back to the workers' own."""
    try:
        return logger_name(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def describe(answer: dict[str, Any]) -> list[str]:
    """One line per level of Storm's logconfig answer, saying until when it holds."""
    lines = []
    for name, level in sorted((answer.get("namedLoggerLevels") or {}).items()):
        epoch = level.get("timeout_epoch") or 0
        if epoch:
            when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch / 1000))
            lines.append(f"  {name}: {level['target_level']} until {when} ({level['timeout']} s)")
        else:
            lines.append(f"  {name}: {level['target_level']} until reset (-r {name})")
    return lines


def cmd_set_log_level(args: argparse.Namespace) -> int:
    client = _client(_client_conf(args))
    path = f"topology/{quote(args.name, safe='')}/logconfig"
    if args.set or args.reset:
        named: dict[str, Any] = {name: {"target_level": level, "timeout": secs}
                                 for name, level, secs in args.set}
        named.update({name: {"target_level": None} for name in args.reset})
        answer = client.request("POST", path, {"namedLoggerLevels": named})
        for name in args.reset:
            print(f"{name}: back to the workers' own level")
    else:
        answer = client.request("GET", path)
    lines = describe(answer)
    print("\n".join([f"log levels set on topology {args.name}:", *lines]) if lines
          else f"no log levels set on topology {args.name}")
    for warning in answer.get("warnings") or []:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def add_commands(sub: Any) -> None:
    p = add_command(sub, "set_log_level", cmd_set_log_level,
                    "change a topology's log levels while it runs, for a while or until reset "
                    "(Storm's set_log_level; without -l or -r: the levels set now)",
                    aliases=("set-log-level",))
    p.add_argument("name", metavar="TOPOLOGY")
    p.add_argument("-l", dest="set", action="append", default=[], type=log_setting,
                   metavar="NAME=LEVEL[:SECS]",
                   help=f"set NAME's level ({', '.join(STORM_LEVELS)}) for SECS seconds, or until reset "
                        "without them; NAME is ROOT, a component id (its own logger) or a logger name "
                        "or prefix, e.g. squall.worker (repeatable)")
    p.add_argument("-r", dest="reset", action="append", default=[], type=log_reset, metavar="NAME",
                   help="reset NAME to the workers' own level (repeatable)")
