"""A TCP port nothing listens on, for a development server or a test to take.

The kernel picks it (bind to port 0), so two callers at once get different ports;
it is free when returned, not reserved: whoever binds it next gets it.
"""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port on ``host`` that was free a moment ago."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
