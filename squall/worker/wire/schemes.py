"""Which transport an address's scheme names: ``inproc://`` (local mode) or ``zmq+tcp://``
(a worker process; its module, and zmq, imported on first use).

Apart from ``transport.py`` because the ZeroMQ backend imports that module's
interface: the table naming it by class path would close a circle there."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from squall.errors import TransportError
from squall.worker.wire.transport import InprocTransport, Transport

_BACKENDS: dict[str, Callable[[], Transport]] = {"inproc": InprocTransport}
# Backends living in modules of their own: scheme -> "module:factory", imported on first use.
_LAZY_BACKENDS: dict[str, str] = {"zmq+tcp": "squall.worker.wire.zmq_transport:ZmqTransport"}


def transport_for(address: str) -> Transport:
    scheme = address.split("://", 1)[0]
    factory = _BACKENDS.get(scheme)
    if factory is None and scheme in _LAZY_BACKENDS:
        module, _, name = _LAZY_BACKENDS[scheme].partition(":")
        factory = _BACKENDS[scheme] = getattr(importlib.import_module(module), name)
    if factory is None:
        known = sorted({*_BACKENDS, *_LAZY_BACKENDS})
        msg = f"no transport for address {address!r} (known schemes: {known})"
        raise TransportError(msg)
    return factory()
