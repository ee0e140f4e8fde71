"""The tokens nimbus mints for one user and one logviewer (squall.security.logtokens), as a
pure core: the key every nimbus derives alike, the CA's endorsement of it, and what a
logviewer refuses -- another logviewer's token, an expired one, a tampered or forged one.
Time is a clock passed in.  (On a real cluster: tests/security/test_logviewer_tokens.py.)"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from squall.clock import FakeClock
from squall.security import logtokens
from squall.security.keyring import Keyring
from squall.security.logtokens import BadToken, Minter

A = "https://10.0.0.1:8000"
B = "https://10.0.0.2:8000"


@pytest.fixture(scope="module")
def cluster() -> Keyring:
    keyring, _ = Keyring.create()
    return keyring


def keys_of(keyring: Keyring) -> dict[str, Ed25519PublicKey]:
    assert keyring.ca_key_pem and keyring.ca_pem
    record = logtokens.public_record(logtokens.signing_key(keyring.ca_key_pem), keyring.ca_key_pem)
    keys, dropped = logtokens.trusted_keys([record], keyring.ca_pem)
    assert dropped == []
    return keys


def minter(keyring: Keyring, clock: FakeClock, validity: float = 300) -> Minter:
    assert keyring.ca_key_pem
    return Minter(logtokens.signing_key(keyring.ca_key_pem), validity, clock.now)


def test_every_nimbus_derives_the_same_key_and_another_cluster_another(cluster: Keyring) -> None:
    assert cluster.ca_key_pem
    one, two = logtokens.signing_key(cluster.ca_key_pem), logtokens.signing_key(cluster.ca_key_pem)
    assert logtokens.key_id(one.public_key()) == logtokens.key_id(two.public_key())
    other, _ = Keyring.create()
    assert other.ca_key_pem
    assert logtokens.key_id(logtokens.signing_key(other.ca_key_pem).public_key()) != logtokens.key_id(
        one.public_key())


def test_a_token_names_its_user_for_its_logviewer_until_it_expires(cluster: Keyring) -> None:
    clock = FakeClock(1_700_000_000.0)
    keys = keys_of(cluster)
    minted = minter(cluster, clock, validity=300).mint("bob", A)
    assert minted.expires == clock.now() + 300 and logtokens.is_minted(minted.token)
    assert logtokens.verify(minted.token, keys, A, clock.now()) == "bob"
    clock.advance(299)
    assert logtokens.verify(minted.token, keys, A, clock.now()) == "bob"
    clock.advance(1)
    with pytest.raises(BadToken, match="expired"):
        logtokens.verify(minted.token, keys, A, clock.now())


def test_a_token_for_one_logviewer_is_refused_by_another(cluster: Keyring) -> None:
    clock = FakeClock(1_700_000_000.0)
    minted = minter(cluster, clock).mint("bob", A)
    with pytest.raises(BadToken, match="another logviewer"):
        logtokens.verify(minted.token, keys_of(cluster), B, clock.now())


def _parts(token: str) -> tuple[dict[str, Any], str]:
    body, _, signature = token.rpartition(".")
    payload = json.loads(base64.urlsafe_b64decode(body[len(logtokens.PREFIX):] + "=="))
    return payload, signature


def _encode(payload: dict[str, Any]) -> str:
    raw = json.dumps(payload, separators=(",", ":")).encode()
    return logtokens.PREFIX + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def test_a_tampered_or_forged_token_is_refused(cluster: Keyring) -> None:
    clock = FakeClock(1_700_000_000.0)
    keys = keys_of(cluster)
    token = minter(cluster, clock).mint("bob", A).token
    payload, signature = _parts(token)
    # Another user, a later expiry, another audience: the signature no longer fits
    for change in ({"sub": "admin"}, {"exp": payload["exp"] + 10**6}, {"aud": B}):
        with pytest.raises(BadToken, match="bad signature"):
            logtokens.verify(_encode({**payload, **change}) + "." + signature, keys, A, clock.now())
    # A key of one's own, claiming nimbus's key id
    forger = Ed25519PrivateKey.generate()
    body = _encode({**payload, "sub": "admin"})
    forged = body + "." + base64.urlsafe_b64encode(forger.sign(body.encode())).rstrip(b"=").decode()
    with pytest.raises(BadToken, match="bad signature"):
        logtokens.verify(forged, keys, A, clock.now())
    # ... or one's own key id
    own = Minter(forger, 300, clock.now).mint("admin", A).token
    with pytest.raises(BadToken, match="does not trust"):
        logtokens.verify(own, keys, A, clock.now())
    # A user's own token, garbage, and a token far too long are no minted token
    for bad in ("sq_" + "x" * 43, "", "sqlv1.", "sqlv1.!!.??", "sqlv1.e30.AAAA", "sqlv1." + "A" * 5000 + ".x",
                _encode({"kid": payload["kid"]}) + "." + signature,
                logtokens.PREFIX + base64.urlsafe_b64encode(b"[" * 1400).decode() + ".x"):
        with pytest.raises(BadToken):
            logtokens.verify(bad, keys, A, clock.now())


def test_a_token_from_the_future_past_the_skew_is_refused(cluster: Keyring) -> None:
    clock = FakeClock(1_700_000_000.0)
    token = minter(cluster, clock).mint("bob", A).token
    keys = keys_of(cluster)
    assert logtokens.verify(token, keys, A, clock.now() - logtokens.SKEW_SECS) == "bob"
    with pytest.raises(BadToken, match="future"):
        logtokens.verify(token, keys, A, clock.now() - logtokens.SKEW_SECS - 1)


def test_a_logviewer_trusts_only_keys_the_clusters_ca_endorsed(cluster: Keyring) -> None:
    assert cluster.ca_key_pem and cluster.ca_pem
    key = logtokens.signing_key(cluster.ca_key_pem)
    record = logtokens.public_record(key, cluster.ca_key_pem)
    other, _ = Keyring.create()
    assert other.ca_key_pem
    # A key endorsed by another CA (written by whoever can write to ZooKeeper), an unendorsed
    # one, a swapped public key under the right endorsement, and junk: none is trusted
    planted = logtokens.public_record(Ed25519PrivateKey.generate(), other.ca_key_pem)
    swapped = {**record, "public": planted["public"]}
    keys, dropped = logtokens.trusted_keys(
        [planted, {**planted, "endorsement": ""}, swapped, "junk", {}, record], cluster.ca_pem)
    assert list(keys) == [record["kid"]] and len(dropped) == 5


def test_the_logviewer_asked_for_is_matched_to_one_a_supervisor_registered() -> None:
    known = ["https://10.0.0.1:8000", "https://node2.internal:443"]
    assert logtokens.registered("https://10.0.0.1:8000", known) == "https://10.0.0.1:8000"
    assert logtokens.registered("https://10.0.0.1:8000/", known) == "https://10.0.0.1:8000"
    # a browser's location.origin drops the default port; names are case-blind
    assert logtokens.registered("https://NODE2.internal", known) == "https://node2.internal:443"
    for other in ("https://10.0.0.1:8001", "http://10.0.0.1:8000", "https://10.0.0.1:8000/api/v1/log",
                  "https://u:p@10.0.0.1:8000", "ftp://10.0.0.1:8000", "https://10.0.0.1:99999", "", None, 7,
                  "https://10.0.0.1:8000?x=1"):
        assert logtokens.registered(other, known) is None, other
