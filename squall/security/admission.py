"""What a user controls may reach a daemon only through these checks (pure: no I/O).

docs/security.md's admission table lists every crossing and names the check
here that guards it.  Three rules:

* **Names and ids** (a topology's name, its definition's name, a
  transactional id, a user's name) become ZooKeeper nodes, directories and
  URL segments: all match :data:`ID`, one znode name and one path component,
  never ``.``/``..``, never a separator.  Nimbus checks them at submit and a
  supervisor again before it makes a path of one (a record written by an
  older nimbus, or by hand, is not trusted).
* **Conf keys that steer daemons** (where ZooKeeper state lives, local
  paths, the launcher's settings, the servers' limits) come from the
  cluster's conf only: a topology's conf naming one is refused at submit,
  and dropped again by a supervisor building a worker's conf.
* **Environment variables** a topology sets (``topology.environment``) reach
  only its worker: names the C loader or libc read at a program's start
  (``LD_PRELOAD`` and kin), which would act in the launcher before it drops
  root, are refused, and so are Squall's own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from squall.errors import ConfigError, TopologyValidationError

# One znode name, one path component: a letter, digit or '_' first (never an option),
# then letters, digits, '_' and '-' (no '.', as Storm refuses it in a topology's name:
# never '.', '..' or a hidden file).
ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}$")
ID_RULE = "1-128 letters, digits, '_' or '-', not starting with '-'"
# A user's name (the keyring's, an admin's choice: 'john.doe') names the user's folders:
# '.' is allowed inside it, never first.
USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
USER_RULE = "1-128 letters, digits, '_', '-' or '.', starting with a letter, digit or '_'"
# A topology's name is shorter: its id (<name>-<seconds>-<6 hex>) must match ID too.
MAX_NAME = 100

# Keys a topology's conf may not set: each steers a daemon (nimbus, a supervisor, the
# launcher, the logviewer, DRPC's server, the node's Spark server) or says where the
# cluster keeps its own state.  A worker gets the cluster's value.
CLUSTER_ONLY_PREFIXES = ("storm.", "nimbus.", "supervisor.", "logviewer.", "ui.", "dev.",
                         "drpc.authorizer.", "squall.env.")
CLUSTER_ONLY_KEYS = frozenset({
    "transactional.zookeeper.root",  # where nimbus grants a topology its nodes
    "squall.secure", "squall.keyring.path", "squall.worker.dir",
    "spark.connect.server.conf", "spark.connect.server.start.timeout.secs", "spark.node.remote",
    "drpc.max.requests", "drpc.max_buffer_size",
})

# Read by the dynamic loader or libc when any program starts (glibc's list of what it
# ignores in a setuid program, and the loader's whole LD_ family): in a launcher that
# starts as root they would run the topology's code as root before the switch of user.
LOADER_NAMES = frozenset({
    "GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH",
    "MALLOC_ARENA_MAX", "MALLOC_ARENA_TEST", "MALLOC_CHECK_", "MALLOC_MMAP_MAX_",
    "MALLOC_MMAP_THRESHOLD_", "MALLOC_PERTURB_", "MALLOC_TOP_PAD_", "MALLOC_TRACE",
    "MALLOC_TRIM_THRESHOLD_", "NIS_PATH", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS",
})
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
MAX_ENV_VALUE = 32 * 1024


def is_id(value: Any) -> bool:
    return isinstance(value, str) and ID.match(value) is not None


def is_user_name(value: Any) -> bool:
    return isinstance(value, str) and USER.match(value) is not None


def check_user_name(what: str, value: Any) -> str:
    if not is_user_name(value):
        msg = f"{what} {value!r} must be {USER_RULE}"
        raise TopologyValidationError(msg)
    return value


def check_id(what: str, value: Any) -> str:
    """``value`` if it is a valid name or id, else a TopologyValidationError naming ``what``."""
    if not is_id(value):
        msg = f"{what} {value!r} must be {ID_RULE}"
        raise TopologyValidationError(msg)
    return value


def is_cluster_only(key: str) -> bool:
    return key in CLUSTER_ONLY_KEYS or key.startswith(CLUSTER_ONLY_PREFIXES)


def check_topology_conf(conf: Mapping[str, Any], where: str = "the topology's conf") -> None:
    """Refuse a topology conf that sets a key only the cluster's conf may set."""
    bad = sorted(k for k in conf if isinstance(k, str) and is_cluster_only(k))
    if bad:
        msg = (f"{where} sets {', '.join(bad)}: {'these keys steer' if len(bad) > 1 else 'this key steers'} "
               "the cluster's daemons and come only from the cluster's conf (docs/security.md)")
        raise ConfigError(msg)
    check_environment(conf.get("topology.environment"))


def cluster_only_removed(conf: Mapping[str, Any]) -> dict[str, Any]:
    """``conf`` without the keys only the cluster's conf may set (a supervisor's second look)."""
    return {k: v for k, v in conf.items() if not (isinstance(k, str) and is_cluster_only(k))}


def refused_env_name(name: Any) -> str | None:
    """Why ``name`` may not be set in a worker's environment by its topology (None: it may)."""
    if not isinstance(name, str) or not ENV_NAME.match(name):
        return "not an environment variable's name (letters, digits and '_', not starting with a digit)"
    if name in LOADER_NAMES or name.startswith("LD_"):
        return "read by the loader or libc at every program's start: it would act in the launcher"
    if name.startswith("SQUALL_"):
        return "Squall's own: set by the supervisor"
    return None


def check_environment(environment: Any) -> None:
    """``topology.environment``: a map of names to strings, numbers or null, no name refused."""
    if environment is None:
        return
    if not isinstance(environment, Mapping):
        got = type(environment).__name__
        msg = f"topology.environment must be a map of variable names to values, got {got}"
        raise ConfigError(msg)
    for name, value in environment.items():
        why = refused_env_name(name)
        if why is not None:
            msg = f"topology.environment names {name!r}: {why}"
            raise ConfigError(msg)
        if value is not None and not isinstance(value, (str, int, float, bool)):
            msg = f"topology.environment[{name!r}] must be a string or a number, got {type(value).__name__}"
            raise ConfigError(msg)
        if "\0" in str(value) or len(str(value)) > MAX_ENV_VALUE:
            msg = f"topology.environment[{name!r}] holds a NUL byte or is over {MAX_ENV_VALUE} characters"
            raise ConfigError(msg)


def allowed_environment(environment: Any) -> tuple[dict[str, str], list[str]]:
    """What of ``topology.environment`` a worker gets, and the names dropped (a second look
    at a record nimbus took in: a name refused now is left out, never passed on)."""
    if not isinstance(environment, Mapping):
        return {}, []
    kept, dropped = {}, []
    for name, value in environment.items():
        text = "" if value is None else str(value)
        if refused_env_name(name) is not None or "\0" in text:
            dropped.append(str(name))
        else:
            kept[name] = text
    return kept, dropped


def check_cluster_roots(storm_root: str, transactional_root: str) -> None:
    """The two ZooKeeper roots of a cluster's conf may not hold one another: a transactional
    id is a node under its root, and one named like the cluster's own folder (``secrets``)
    would be granted to a topology's identity."""
    a, b = storm_root.rstrip("/") or "/", transactional_root.rstrip("/") or "/"
    if a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/"):
        msg = (f"transactional.zookeeper.root ({transactional_root}) and storm.zookeeper.root "
               f"({storm_root}) may not be one inside the other: topologies' transactional ids are "
               "nodes under the first, granted to their own identities")
        raise ConfigError(msg)
