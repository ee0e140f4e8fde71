"""Daemon and client configuration: defaults < squall.yaml < command line.

The file is ``--config PATH``, else ``$SQUALL_CONF``, else ``./squall.yaml``
if it exists.  Keys are Storm's (``storm.zookeeper.servers``,
``nimbus.seeds``, ``supervisor.slots.ports``, ...).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from squall import config as config_mod
from squall.errors import ConfigError

ENV_VAR = "SQUALL_CONF"


def config_path(explicit: str | None) -> Path | None:
    if explicit:
        return Path(explicit)
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    default = Path("squall.yaml")
    return default if default.exists() else None


def load_conf(explicit: str | None = None, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    path = config_path(explicit)
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
