"""DRPC: a topology as a distributed function a client calls (Storm's Distributed RPC;
docs/drpc.md).

What topologies and clients use lives here: ``DRPCClient``, ``LocalDRPC``,
``DRPCSpout``, ``ReturnResults``, ``LinearDRPCTopologyBuilder`` and the invocations API
a spout of one's own fetches requests with (``DRPCInvocations``).  The server daemon
(``squall drpc``) is squall.drpc_server.
"""

from typing import TYPE_CHECKING

from squall.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "DRPCClient": "squall.drpc.client",
    "DRPCExecutionError": "squall.errors",
    "DRPCInvocations": "squall.drpc.invocations",
    "DRPCRequest": "squall.drpc.invocations",
    "DRPCSpout": "squall.drpc.spout",
    "JoinResult": "squall.drpc.linear",
    "LinearDRPCInputDeclarer": "squall.drpc.linear",
    "LinearDRPCTopologyBuilder": "squall.drpc.linear",
    "LocalDRPC": "squall.drpc.local",
    "PrepareRequest": "squall.drpc.linear",
    "ReturnResults": "squall.drpc.returns",
}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
__all__ = [
    "DRPCClient",
    "DRPCExecutionError",
    "DRPCInvocations",
    "DRPCRequest",
    "DRPCSpout",
    "JoinResult",
    "LinearDRPCInputDeclarer",
    "LinearDRPCTopologyBuilder",
    "LocalDRPC",
    "PrepareRequest",
    "ReturnResults",
]

if TYPE_CHECKING:
    from squall.drpc.client import DRPCClient
    from squall.drpc.invocations import DRPCInvocations, DRPCRequest
    from squall.drpc.linear import (
        JoinResult,
        LinearDRPCInputDeclarer,
        LinearDRPCTopologyBuilder,
        PrepareRequest,
    )
    from squall.drpc.local import LocalDRPC
    from squall.drpc.returns import ReturnResults
    from squall.drpc.spout import DRPCSpout
    from squall.errors import DRPCExecutionError
