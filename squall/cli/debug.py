"""``squall debug``: Storm's "Debug" and "Stop Debug" from the command line -- sample a share
of the tuples a running topology's components (or one component) emit into their workers'
``events.log``, or stop, through Storm's ``/api/v1/topology/:id[/component/:c]/debug/:action/:spct``
(what the settings mean: squall.runtime.debug_options)::

    squall debug wordcount -c split --enable --pct 100   # every tuple split emits
    squall debug wordcount --enable                      # 10 % of every component's
    squall debug wordcount -c split --disable            # split stops (whatever the topology's)
    squall debug wordcount                               # what is set now
    squall logs wordcount --events -c split              # the sampled tuples, from the logviewers
"""

from __future__ import annotations

import argparse
from typing import Any
from urllib.parse import quote

from squall.cli.cluster import _client, _client_conf, add_command
from squall.errors import SquallError
from squall.runtime.debug_options import DEFAULT_PCT, parse_pct


def percentage(text: str) -> float:
    try:
        return parse_pct(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def _pct(value: float) -> str:
    return f"{value:g} %"


def cmd_debug(args: argparse.Namespace) -> int:
    if args.pct is not None and not args.enable:
        raise SquallError("--pct goes with --enable (the share of tuples sampled from then on)")
    client = _client(_client_conf(args))
    path = f"topology/{quote(args.name, safe='')}"
    if args.component is not None:
        path += f"/component/{quote(args.component, safe='')}"
    what = f"component {args.component!r} of topology {args.name!r}" if args.component \
        else f"every component of topology {args.name!r}"
    pct = DEFAULT_PCT if args.pct is None else args.pct
    if args.enable or args.disable:
        action = "enable" if args.enable else "disable"
        client.request("POST", f"{path}/debug/{action}/{pct:g}")
        if args.enable:
            print(f"debug on: {_pct(pct)} of the tuples {what} emits go to its workers' events.log")
            print(f"see them with: squall logs {args.name} --events" +
                  (f" -c {args.component}" if args.component else ""))
        else:
            print(f"debug off for {what}")
        return 0
    page: dict[str, Any] = client.request("GET", path)
    state = f"on, {_pct(page.get('samplingPct', 0))}" if page.get("debug") else "off"
    print(f"debug {state} for {what}")
    return 0


def add_commands(sub: Any) -> None:
    p = add_command(sub, "debug", cmd_debug,
                    "sample the tuples a running topology's components emit into their workers' "
                    "events.log (Storm's Debug / Stop Debug); without --enable or --disable: what is set")
    p.add_argument("name", metavar="TOPOLOGY")
    p.add_argument("-c", "--component", default=None,
                   help="only this component (its own setting beats the topology's)")
    switch = p.add_mutually_exclusive_group()
    switch.add_argument("--enable", action="store_true", help="start sampling")
    switch.add_argument("--disable", action="store_true", help="stop sampling")
    p.add_argument("--pct", type=percentage, default=None,
                   help=f"the share of tuples sampled, 0-100 (default {DEFAULT_PCT:g}, Storm's)")
