"""The authorizer's table (Storm's SimpleACLAuthorizer shape), and redaction."""

from __future__ import annotations

import pytest

from squall import config
from squall.security import authz
from squall.security.redact import REDACTED, redact, redact_answer

CONF = {**config.DEFAULTS, "nimbus.admins": ["root"], "nimbus.readonly.users": ["auditor"]}
TOPOLOGY = {"name": "t", "owner": "alice", "conf": {"topology.users": ["carol"]}}


@pytest.mark.parametrize(("user", "action", "allowed"), [
    ("root", "kill", True), ("root", authz.SUBMIT, True),
    ("alice", "kill", True), ("alice", "rebalance", True),   # the owner
    ("carol", "deactivate", True),                            # topology.users
    ("alice", authz.SET_LOG_LEVEL, True), ("carol", authz.SET_LOG_LEVEL, True),
    ("bob", "kill", False), ("bob", "activate", False),       # anyone else
    ("bob", authz.SET_LOG_LEVEL, False), ("auditor", authz.SET_LOG_LEVEL, False),
    ("bob", authz.SUBMIT, True), ("bob", authz.READ, True),
    ("auditor", authz.READ, True), ("auditor", authz.SUBMIT, False), ("auditor", "kill", False),
])
def test_decisions(user: str, action: str, allowed: bool) -> None:
    decision = authz.decide(user, action, CONF, TOPOLOGY)
    assert decision.allowed is allowed, decision.reason
    if not allowed:
        assert user in decision.reason


def test_nimbus_users_limits_who_submits() -> None:
    conf = {**CONF, "nimbus.users": ["alice"]}
    assert authz.decide("alice", authz.SUBMIT, conf).allowed
    refused = authz.decide("bob", authz.SUBMIT, conf)
    assert not refused.allowed and "nimbus.users" in refused.reason


def test_redaction_by_name_by_list_and_inside_values() -> None:
    conf = {"redis.password": "p", "db.auth_token": "t", "aws.secret": "s", "api.key": "k1",
            "topology.name": "n",
            "topology.secret.keys": ["my.dsn"], "my.dsn": "postgres://u:p@h/db",
            "spark.remote": "sc://h:15002/;token=abc", "topology.workers": 2, "nested": {"x.password": "q"}}
    out = redact(conf)
    for key in ("redis.password", "db.auth_token", "aws.secret", "api.key", "my.dsn"):
        assert out[key] == REDACTED
    assert out["spark.remote"] == f"sc://h:15002/;token={REDACTED}"
    assert out["nested"]["x.password"] == REDACTED
    assert out["topology.workers"] == 2 and out["topology.name"] == "n"
    answer = redact_answer({"topologies": [{"configuration": conf}]})
    assert answer["topologies"][0]["configuration"]["my.dsn"] == REDACTED


@pytest.mark.parametrize("key", ["aws.secret_access_key", "s3.secret-access-key", "ssh.passphrase",
                                 "tls.private.key", "jwt.private_key", "oauth.client_secret"])
def test_credential_shaped_keys_are_redacted(key: str) -> None:
    assert redact({key: "hunter2"})[key] == REDACTED


@pytest.mark.parametrize("key", ["aws.access_key_id", "tls.public.key", "topology.name", "keyring.path"])
def test_keys_that_hold_no_secret_are_kept(key: str) -> None:
    assert redact({key: "v"})[key] == "v"


def test_a_urls_password_is_redacted_and_the_rest_of_it_kept() -> None:
    out = redact_answer({"db": "postgres://u:pw@db.example:5432/app", "note": "see redis://:pw2@h:6379/0 now",
                         "plain": "https://example.com/a:b@c", "bare": "u:pw@host"})
    assert out["db"] == f"postgres://u:{REDACTED}@db.example:5432/app"
    assert out["note"] == f"see redis://:{REDACTED}@h:6379/0 now"
    assert out["plain"] == "https://example.com/a:b@c"  # a path, not user-info
    assert out["bare"] == "u:pw@host"  # no scheme: not a URL
