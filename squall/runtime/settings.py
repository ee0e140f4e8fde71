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


def dev_cluster_config() -> Path | None:
    """The running dev cluster's squall.yaml, if ``squall dev-cluster`` named one that is there."""
    try:
        named = Path(Path(DEV_CLUSTER_POINTER).expanduser().read_text().strip())
    except OSError:
        return None
    return named if named.is_absolute() and named.is_file() else None


def point_at_dev_cluster(config: Path) -> Path:
    """Name ``config`` as the running dev cluster's (0600, in a 0700 folder)."""
    pointer = Path(DEV_CLUSTER_POINTER).expanduser()
    pointer.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_private(pointer, str(config.resolve()) + "\n")
    return pointer


def forget_dev_cluster(config: Path) -> None:
    """Remove the pointer if it still names ``config`` (another dev cluster may have taken it)."""
    pointer = Path(DEV_CLUSTER_POINTER).expanduser()
    try:
        if pointer.read_text().strip() == str(config.resolve()):
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
