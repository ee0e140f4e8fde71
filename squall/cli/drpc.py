"""``squall drpc``: a DRPC server, and ``squall drpc-client``: call DRPC functions (Storm's).

    squall drpc                                   # the server, in the foreground
    squall drpc-client exclamation hello reach http://x     # pairs of function and args
    squall drpc-client -f exclamation hello world           # one function, several args

Each call prints ``function "args" => "result"`` as Storm's client does; the first that
gets no result (the topology failed it, it timed out) stops the command with its reason.
"""

from __future__ import annotations

import argparse
from typing import Any

from squall.errors import SquallError
from squall.runtime.settings import load_conf


def cmd_drpc(args: argparse.Namespace) -> int:
    from squall.drpc_server.daemon import DRPCServer
    from squall.runtime.daemons import run_foreground

    return run_foreground(DRPCServer(load_conf(args.config)), "drpc")


def calls(function: str | None, arguments: list[str]) -> list[tuple[str, str]]:
    """(function, args) to make, as Storm's drpc-client reads its command line."""
    if function is not None:
        return [(function, a) for a in arguments]
    if len(arguments) % 2:
        msg = (f"without -f the arguments are pairs of function and args; got {len(arguments)} "
               f"({' '.join(arguments)})")
        raise SquallError(msg)
    return [(arguments[i], arguments[i + 1]) for i in range(0, len(arguments), 2)]


def cmd_drpc_client(args: argparse.Namespace) -> int:
    from squall.drpc.client import DRPCClient

    todo = calls(args.function, args.function_arguments)
    with DRPCClient(load_conf(args.config, client=True), timeout=args.timeout) as client:
        for function, arg in todo:
            print(f'{function} "{arg}" => "{client.execute(function, arg)}"', flush=True)
    return 0


def add_commands(sub: Any) -> None:
    def command(name: str, func: Any, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--config", default=argparse.SUPPRESS,
                       help="squall.yaml to read (default: $SQUALL_CONF or ./squall.yaml)")
        p.set_defaults(func=func)
        return p

    command("drpc", cmd_drpc, "run a DRPC server in the foreground (drpc.port)")
    p = command("drpc-client", cmd_drpc_client,
                "call DRPC functions: FUNCTION ARGS pairs, or -f FUNCTION ARGS...")
    p.add_argument("-f", "--function", default=None,
                   help="the function: every argument is one call's args (else pairs of function and args)")
    p.add_argument("-t", "--timeout", type=float, default=None,
                   help="seconds to wait for each answer (default: the server's drpc.request.timeout.secs "
                        "and a margin)")
    p.add_argument("function_arguments", nargs="*", default=[], metavar="ARG")
