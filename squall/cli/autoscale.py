"""``squall autoscale log|enable|disable NAME``: self-regulation's action log and switch
(nimbus's ``/api/v1/topology/:id/autoscale``; squall.nimbus.autoscale)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from squall.cli import tables


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("what", choices=("log", "enable", "disable"),
                   help="log: what it did and why, newest first; enable/disable: switch it at run time")
    p.add_argument("name", help="the topology")
    p.add_argument("--json", action="store_true", help="the REST answer, for scripts")


def run(args: argparse.Namespace, client: Callable[[], Any], show: Callable[[Any], None]) -> int:
    path = f"topology/{quote(args.name, safe='')}/autoscale"
    if args.what == "log":
        answer = client().request("GET", path)
        if args.json:
            show(answer)
        else:
            print(tables.autoscale_report(answer))
        return 0
    answer = client().request("POST", f"{path}/{args.what}")
    print(f"self-regulation of {answer['topology']}: {'enabled' if answer['enabled'] else 'disabled'}")
    return 0
