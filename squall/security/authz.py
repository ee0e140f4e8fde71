"""Who may do what to the cluster: Storm's authorizer, as a pure function.

Storm's SimpleACLAuthorizer shape, on identities the keyring authenticated:

* ``nimbus.admins`` may do anything;
* ``nimbus.readonly.users`` may only read;
* anyone else authenticated may read; may submit if ``nimbus.users`` is None
  (the default) or names them;
* a topology's owner (who submitted it) and the users its conf lists in
  ``topology.users`` may kill, rebalance, activate and deactivate it, set
  its log levels (Storm's setLogConfig) and its debug sampling (Storm's debug), and
  profile or restart its workers (Storm's setWorkerProfiler);
* a topology's details (its definition, configuration, errors, workers: Storm's
  getTopologyConf and getTopologyInfo) are read by its owner, ``topology.users``
  and ``logs.users``, ``nimbus.readonly.users`` and the admins only; the list of
  topologies and the cluster's summaries by any user.

Reading never shows a secret (squall.security.redact does that for everyone).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

READ = "read"
READ_TOPOLOGY = "read_topology"
SUBMIT = "submit"
SET_LOG_LEVEL = "set_log_level"
PROFILE = "profile"  # Storm's setWorkerProfiler: a stack dump, a profile or a restart of a worker
DEBUG = "debug"  # Storm's debug: event log sampling switched on or off
MANAGE = ("kill", "rebalance", "activate", "deactivate", SET_LOG_LEVEL, PROFILE, DEBUG)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str


def decide(user: str, action: str, conf: Mapping[str, Any],
           topology: Mapping[str, Any] | None = None) -> Decision:
    """May ``user`` perform ``action`` (READ, SUBMIT, or one of MANAGE on ``topology``)?

    ``conf`` is nimbus's; ``topology`` the stored record (``owner``, ``conf``)."""
    if user in (conf.get("nimbus.admins") or ()):
        return Decision(True, "admin")
    if action == READ:
        return Decision(True, "authenticated")
    if action == READ_TOPOLOGY:
        return _may_read_topology(user, conf, topology)
    if user in (conf.get("nimbus.readonly.users") or ()):
        return Decision(False, f"user {user!r} is read-only (nimbus.readonly.users)")
    if action == SUBMIT:
        allowed = conf.get("nimbus.users")
        if allowed is None or user in allowed:
            return Decision(True, "nimbus.users")
        return Decision(False, f"user {user!r} may not submit topologies (not in nimbus.users)")
    if action not in MANAGE:
        return Decision(False, f"unknown action {action!r}")
    if topology is None:
        return Decision(False, "no such topology")
    if topology.get("owner") == user:
        return Decision(True, "owner")
    if user in ((topology.get("conf") or {}).get("topology.users") or ()):
        return Decision(True, "topology.users")
    name = topology.get("name", "?")
    return Decision(False, f"user {user!r} may not {action} topology {name!r} "
                           "(not its owner, not in its topology.users, not in nimbus.admins)")


def _may_read_topology(user: str, conf: Mapping[str, Any], topology: Mapping[str, Any] | None) -> Decision:
    if topology is None:
        return Decision(False, "no such topology")
    own = topology.get("conf") or {}
    if user in (conf.get("nimbus.readonly.users") or ()):
        return Decision(True, "nimbus.readonly.users")
    if topology.get("owner") == user:
        return Decision(True, "owner")
    if user in (own.get("topology.users") or ()) or user in (own.get("logs.users") or ()):
        return Decision(True, "topology.users")
    return Decision(False, f"user {user!r} may not read topology {topology.get('name', '?')!r}'s definition, "
                           "configuration and errors (not its owner, not in its topology.users or "
                           "logs.users, not in nimbus.readonly.users or nimbus.admins)")


def may_read_logs(user: str, conf: Mapping[str, Any], readers: Mapping[str, Any] | None) -> Decision:
    """May ``user`` read a log?  Storm's logviewer's rule: ``nimbus.admins`` and the
    cluster's ``logs.users`` read every log; a worker's log also its topology's owner,
    ``topology.users`` and its own ``logs.users`` (``readers``, kept beside the log when
    the worker started: the topology may be gone by the time someone reads it).  A
    daemon's log (``readers`` None) only the first two."""
    if user in (conf.get("nimbus.admins") or ()) or user in (conf.get("logs.users") or ()):
        return Decision(True, "admin")
    if readers is not None:
        if readers.get("owner") == user:
            return Decision(True, "owner")
        if user in (readers.get("users") or ()):
            return Decision(True, "topology.users")
        name = readers.get("topology", "?")
        return Decision(False, f"user {user!r} may not read the logs of topology {name!r} (not its owner, "
                               "not in its topology.users or logs.users, not in nimbus.admins or logs.users)")
    return Decision(False, f"user {user!r} may not read the daemons' logs "
                           "(not in nimbus.admins or logs.users)")
