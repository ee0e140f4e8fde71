"""Daemon and client configuration: defaults < squall.yaml < command line.

The file is ``--config PATH``, else ``$SQUALL_CONF``, else ``./squall.yaml``
if it exists; for a cluster's client commands (submit, list, kill, ...), else
the running dev cluster's, which ``squall dev-cluster`` names in
``~/.squall/dev-cluster`` (as Storm's client reads ``~/.storm/storm.yaml``).
Keys are Storm's (``storm.zookeeper.servers``, ``nimbus.seeds``,
``supervisor.slots.ports``, ...).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from squall import config as config_mod
from squall.errors import ConfigError
from squall.security.files import write_private

ENV_VAR = "SQUALL_CONF"


DEV_CLUSTER_POINTER = "~/.squall/dev-cluster"  # the running dev cluster's squall.yaml


def config_path(explicit: str | None, client: bool = False) -> Path | None:
    if explicit:
        return Path(explicit)
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    default = Path("squall.yaml")
    if default.exists():
        return default
    return dev_cluster_config() if client else None


# The pointer names every running dev cluster, one line each, "<pid> <squall.yaml>", the
# latest started last: a client finds the latest still running, and a dev cluster that
# stops takes out its own line only, so one started after another and stopped first
# leaves the other findable.


def _running_dev_clusters(pointer: Path) -> list[tuple[int, Path]]:
    try:
        lines = pointer.read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        pid_text, _, path = line.strip().partition(" ")
        if not pid_text.isdigit() or not path:
            continue  # an older Squall's line (a bare path) or damage: not one of ours
        named = Path(path)
        if named.is_absolute() and named.is_file() and _alive(int(pid_text)):
            out.append((int(pid_text), named))
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def dev_cluster_config() -> Path | None:
    """The latest running dev cluster's squall.yaml, if ``squall dev-cluster`` named one."""
    running = _running_dev_clusters(Path(DEV_CLUSTER_POINTER).expanduser())
    return running[-1][1] if running else None


def point_at_dev_cluster(config: Path, pid: int | None = None) -> Path:
    """Name ``config`` as a running dev cluster's, the latest (0600, in a 0700 folder)."""
    pointer = Path(DEV_CLUSTER_POINTER).expanduser()
    pointer.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    pid = os.getpid() if pid is None else pid
    config = config.resolve()
    kept = [(p, c) for p, c in _running_dev_clusters(pointer) if c != config]
    write_private(pointer, "".join(f"{p} {c}\n" for p, c in [*kept, (pid, config)]))
    return pointer


def forget_dev_cluster(config: Path) -> None:
    """Take ``config``'s line out of the pointer (the others' stay)."""
    pointer = Path(DEV_CLUSTER_POINTER).expanduser()
    config = config.resolve()
    kept = [(p, c) for p, c in _running_dev_clusters(pointer) if c != config]
    try:
        if kept:
            write_private(pointer, "".join(f"{p} {c}\n" for p, c in kept))
        else:
            pointer.unlink()
    except OSError:
        pass


def load_conf(explicit: str | None = None, overrides: dict[str, Any] | None = None,
              client: bool = False) -> dict[str, Any]:
    path = config_path(explicit, client)
    layer: dict[str, Any] = {}
    if path is not None:
        try:
            layer = yaml.safe_load(path.read_text()) or {}
        except OSError as e:
            msg = f"cannot read config file {path}: {e}"
            raise ConfigError(msg) from e
        except yaml.YAMLError as e:
            msg = f"config file {path} is not valid YAML: {e}"
            raise ConfigError(msg) from e
        if not isinstance(layer, dict):
            msg = f"config file {path} must hold a mapping of keys to values"
            raise ConfigError(msg)
    try:
        return config_mod.merge(layer, overrides)
    except ConfigError as e:
        where = f" in {path}" if path is not None else ""
        msg = f"{e}{where}"
        raise ConfigError(msg) from e
