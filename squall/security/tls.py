"""TLS for nimbus's API: the dev cluster's CA, and the ssl contexts.

``squall secrets init`` makes a CA (ECDSA P-256, ten years) and a nimbus
certificate it signs, valid for ``localhost``, ``127.0.0.1``, this host's name
and any ``--host`` given.  A production cluster may instead point
``nimbus.tls.cert.path`` / ``nimbus.tls.key.path`` at real certificates and its
clients' ``nimbus.tls.ca.path`` at what signed them.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import tempfile
from collections.abc import Iterable
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 3650


def _pem_key(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Squall"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def new_ca(cluster: str) -> tuple[str, str]:
    """A self-signed CA: (certificate PEM, key PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    name = _name(f"{cluster} CA")
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM).decode(), _pem_key(key)


def new_server_cert(ca_cert_pem: str, ca_key_pem: str, hosts: Iterable[str]) -> tuple[str, str]:
    """A server certificate for ``hosts`` (names or IP addresses), signed by the CA."""
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem.encode())
    ca_key = serialization.load_pem_private_key(ca_key_pem.encode(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        msg = "the keyring's CA key is not an EC key"
        raise ValueError(msg)
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(_name("squall nimbus")).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM).decode(), _pem_key(key)


def server_context(cert_pem: str, key_pem: str) -> ssl.SSLContext:
    """Nimbus's context.  ssl loads a chain only from files: they exist for the
    instant of the load, in a private directory, and are gone after it."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    with tempfile.TemporaryDirectory(prefix="squall-tls-") as tmp:
        cert, key = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
        cert.write_text(cert_pem)
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(key_pem)
        context.load_cert_chain(cert, key)
    return context


def server_context_from_files(cert_path: str, key_path: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_path, key_path)
    return context


def client_context(ca_pem: str | None = None, ca_path: str | None = None) -> ssl.SSLContext:
    """Verifies nimbus's certificate against the given CA (the system's when neither)."""
    context = ssl.create_default_context(cafile=ca_path, cadata=ca_pem)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context
