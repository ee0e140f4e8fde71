"""DRPC: a topology as a distributed function a client calls (Storm's Distributed RPC;
docs/drpc.md).

What topologies and clients use lives here: ``DRPCClient``, ``LocalDRPC``,
``DRPCSpout``, ``ReturnResults``, ``LinearDRPCTopologyBuilder`` and the invocations API
a spout of one's own fetches requests with (``DRPCInvocations``).  The server daemon
(``squall drpc``) is squall.drpc_server.
"""

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
__all__ = sorted(_EXPORTS)
