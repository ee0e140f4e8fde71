"""The keyring: 0600 files, tokens checked by hash, rotation without a gap."""

from __future__ import annotations

import json
import os
import ssl
from pathlib import Path

import pytest

from squall.errors import ConfigError
from squall.security import tls
from squall.security.keyring import Keyring, KeyringWatch


def test_created_keyring_is_private_and_authenticates_its_admin(tmp_path: Path) -> None:
    keyring, token = Keyring.create()
    path = keyring.save(tmp_path / "dir" / "keyring.json")
    assert path.stat().st_mode & 0o777 == 0o600
    loaded = Keyring.load(path)
    assert loaded.authenticate(token) == "admin"
    assert loaded.client_token == token
    assert loaded.authenticate(token + "x") is None
    assert loaded.authenticate("") is None
    # Only a hash of the token is kept in the users section.
    assert token not in json.dumps(loaded.users)


def test_a_keyring_readable_by_others_is_refused(tmp_path: Path) -> None:
    keyring, _ = Keyring.create()
    path = keyring.save(tmp_path / "keyring.json")
    os.chmod(path, 0o644)
    with pytest.raises(ConfigError, match=r"readable by others.*chmod 600"):
        Keyring.load(path)


def test_missing_or_garbled_keyring_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="squall secrets init"):
        Keyring.load(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    bad.chmod(0o600)
    with pytest.raises(ConfigError, match="not valid JSON"):
        Keyring.load(bad)


def test_user_tokens_rotate_without_a_gap(tmp_path: Path) -> None:
    keyring, _ = Keyring.create()
    old = keyring.add_user("alice")
    new = keyring.rotate_user("alice")
    assert keyring.authenticate(old) == keyring.authenticate(new) == "alice"
    assert keyring.retire_user("alice") == 1
    assert keyring.authenticate(old) is None
    assert keyring.authenticate(new) == "alice"
    keyring.remove_user("alice")
    assert keyring.authenticate(new) is None
    with pytest.raises(ConfigError, match="exists already"):
        keyring.add_user("admin")
    with pytest.raises(ConfigError, match="user name"):
        keyring.add_user("a b")


def test_a_user_keyring_holds_only_their_token_and_the_ca() -> None:
    keyring, _ = Keyring.create()
    token = keyring.add_user("bob")
    theirs = keyring.client_keyring("bob", token)
    assert theirs.client_user == "bob" and theirs.client_token == token
    assert set(theirs.data) == {"format", "cluster", "client", "tls"}
    assert set(theirs.data["tls"]) == {"ca"}


@pytest.mark.parametrize("daemon", ["supervisor", "drpc"])
def test_a_daemons_keyring_holds_no_token_and_no_key_of_nimbus_or_the_ca(tmp_path: Path, daemon: str) -> None:
    # (its workers run users' code: before issue 29 the supervisor held the admin's token;
    # a DRPC server's keyring is the same: it checks users' tokens, and holds none)
    import subprocess
    import sys

    keyring, admin = Keyring.create()
    keyring.save(tmp_path / "k.json")
    out = subprocess.run([sys.executable, "-m", "squall.cli", "secrets", daemon, "--keyring",
                          str(tmp_path / "k.json"), "--out", str(tmp_path / "s.json")],
                         capture_output=True, text=True, timeout=60, check=True)
    assert "no token itself" in out.stdout
    theirs = Keyring.load(tmp_path / "s.json")  # 0600, or this refuses it
    # A supervisor holds not even the users' token hashes: its logviewer takes only the
    # tokens nimbus mints (squall.security.logtokens), so a user added later needs no copy.
    users = {"users"} if daemon == "drpc" else set()
    assert set(theirs.data) == {"format", "cluster", "zookeeper", "tls"} | users
    assert set(theirs.data["tls"]) == {"ca", "cert", "key", "hosts"}  # its logviewer's, not nimbus's
    assert theirs.data["tls"]["key"] != keyring.data["tls"]["key"]
    assert "ca_key" not in (tmp_path / "s.json").read_text()
    assert theirs.zookeeper_credentials() == keyring.zookeeper_credentials()
    assert admin not in (tmp_path / "s.json").read_text()
    # A DRPC server's: the users' token hashes, to know who a token is, and no token.
    assert theirs.authenticate(admin) == ("admin" if users else None) and theirs.client_token is None
    assert theirs.ca_key_pem is None and keyring.ca_key_pem  # what nimbus's token key comes from


def test_zookeeper_rotation_keeps_the_previous_password() -> None:
    keyring, _ = Keyring.create()
    (first,) = keyring.zookeeper_credentials()
    keyring.rotate_zookeeper()
    current, previous = keyring.zookeeper_credentials()
    assert previous == first and current != first
    keyring.rotate_zookeeper()
    assert len(keyring.zookeeper_credentials()) == 2


def test_watch_sees_a_rotated_token_without_a_restart(tmp_path: Path) -> None:
    keyring, token = Keyring.create()
    path = keyring.save(tmp_path / "keyring.json")
    watch = KeyringWatch(path)
    assert watch.current().authenticate(token) == "admin"
    alice = keyring.add_user("alice")
    keyring.save()
    os.utime(path, ns=(1, 1))  # a new mtime even on a coarse clock
    assert watch.current().authenticate(alice) == "alice"
    path.write_text("garbage")  # a bad rewrite keeps the last good keyring
    assert watch.current().authenticate(alice) == "alice"


def test_nimbus_certificate_verifies_against_the_keyring_ca() -> None:
    keyring, _ = Keyring.create(hosts=["nimbus.example.com"])
    cert_pem, _key = keyring.server_cert()
    assert "nimbus.example.com" in keyring.data["tls"]["hosts"]
    context = tls.client_context(ca_pem=keyring.ca_pem)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    server = tls.server_context(*keyring.server_cert())
    assert server.minimum_version >= ssl.TLSVersion.TLSv1_2
    assert "BEGIN CERTIFICATE" in cert_pem


def test_a_daemons_certificate_names_its_own_host_only_never_nimbuss() -> None:
    # Issue 47: supervisor and DRPC certificates were valid for nimbus's names, so a key
    # taken from a supervisor node could pass for nimbus and collect users' tokens.
    from cryptography import x509

    keyring, _token = Keyring.create(hosts=["nimbus1.internal", "10.0.0.10"])

    def names(ring: Keyring) -> list[str]:
        cert = x509.load_pem_x509_certificate(ring.server_cert()[0].encode())
        alt = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        return sorted([*alt.get_values_for_type(x509.DNSName),
                       *(str(ip) for ip in alt.get_values_for_type(x509.IPAddress))])

    assert "nimbus1.internal" in names(keyring)
    assert names(keyring.supervisor_keyring(["sup1.internal", "10.0.0.12"])) == ["10.0.0.12", "sup1.internal"]
    assert names(keyring.drpc_keyring(["drpc1.internal"])) == ["drpc1.internal"]
    assert "nimbus1.internal" not in names(keyring.supervisor_keyring())
