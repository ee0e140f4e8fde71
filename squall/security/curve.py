"""A topology's CURVE keypair (Curve25519), made by nimbus at submit.

Every worker of one topology holds the same keypair: its PULL socket is a
CURVE server with the secret key, its PUSH sockets are CURVE clients with it,
and the ZAP handler admits a client only if its public key is the topology's.
A process without the secret can neither connect nor read a frame.

Keys travel base64-encoded (JSON-safe); the worker's transport turns them into
ZeroMQ's Z85 text.  Made with ``cryptography`` so that nimbus needs no zmq.
"""

from __future__ import annotations

import base64

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat


def new_keypair() -> dict[str, str]:
    """``{"public": b64, "secret": b64}``, 32 raw bytes each."""
    key = X25519PrivateKey.generate()
    secret = key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return {"public": base64.b64encode(public).decode(), "secret": base64.b64encode(secret).decode()}


def raw(keypair: dict[str, str]) -> tuple[bytes, bytes]:
    """(public, secret) as 32 raw bytes each; ValueError if either is not a key."""
    public, secret = base64.b64decode(keypair["public"]), base64.b64decode(keypair["secret"])
    if len(public) != 32 or len(secret) != 32:
        msg = "a CURVE key must be 32 bytes"
        raise ValueError(msg)
    return public, secret
