"""How a shell component's child is launched: command, directory, environment, limits.

Options given to ``ShellBolt.spec(...)`` win over class attributes of a
``ShellBolt`` subclass (``command``, ``script``, ``args``, ``cwd``, ``env``).

**Working directory** (Storm runs the script in the topology's resources
directory), first that applies:

1. ``cwd=`` given to ``spec`` (relative to the file that called ``spec``);
2. the ``topology.multilang.resources.dir`` config key;
3. ``resources/`` beside the file that called ``spec`` (the file defining
   the topology), if that directory exists;
4. the directory of that file.

Config keys read (Storm's defaults when absent): ``topology.multilang.serializer``
(Storm's JSON serializer), ``topology.subprocess.timeout.secs`` (else
``supervisor.worker.timeout.secs``, 30), ``topology.shellbolt.max.pending`` (100),
``supervisor.worker.restart.backoff.initial.secs``/``.max.secs`` (1 s / 30 s, the
back-off between restarts of a child that keeps dying),
``topology.multilang.max.message.bytes`` (64 MiB: a longer message from a
child is a protocol fault), ``storm.local.dir`` (a
worker process's pid directory lives under it; local mode uses a temporary
directory) and, for debugging,
``topology.multilang.tap.dir``: record every child's bytes there.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from squall import config
from squall.errors import ConfigError
from squall.multilang.codec import (
    DEFAULT_MAX_MESSAGE_BYTES,
    JSON_SERIALIZER,
    MAX_MESSAGE_KEY,
    JsonCodec,
    MsgpackCodec,
    codec_for,
)

DEFAULT_MAX_PENDING = 100
DEFAULT_TIMEOUT_SECS = 30.0
HEARTBEAT_SECS = 1.0
SERIALIZER_ENV = "SQUALL_MULTILANG_SERIALIZER"


@dataclass(frozen=True)
class ShellSettings:
    argv: list[str]
    cwd: str
    env: dict[str, str]
    codec: JsonCodec | MsgpackCodec
    timeout: float
    max_pending: int
    max_message_bytes: int
    heartbeat_secs: float
    restart_initial: float
    restart_max: float
    tap_dir: str | None
    metrics: frozenset[str] | None


def caller_dir(depth: int = 2) -> str:
    """The directory of the source file ``depth`` frames up (where ``spec`` was called)."""
    frame = sys._getframe(depth)
    filename = frame.f_code.co_filename
    if not filename or filename.startswith("<"):
        return os.getcwd()
    return os.path.dirname(os.path.abspath(filename))


def _number(conf: Mapping[str, Any], key: str, default: float, minimum: float) -> float:
    value = conf.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
        msg = f"config {key!r} must be a number >= {minimum}, got {value!r}"
        raise ConfigError(msg)
    return float(value)


def command_line(options: Mapping[str, Any], component: str) -> list[str]:
    """The child's argv: ``command`` (a string or a list), then ``script``, then ``args``."""
    command = options.get("command")
    if command is None:
        msg = f"shell component {component!r} needs command= (e.g. command='node', script='split.js')"
        raise ConfigError(msg)
    argv = [command] if isinstance(command, str) else [str(c) for c in command]
    if not argv or not argv[0]:
        msg = f"shell component {component!r}: empty command"
        raise ConfigError(msg)
    script = options.get("script")
    if script:
        argv.append(str(script))
    args = options.get("args") or ()
    if isinstance(args, str):
        args = [args]
    argv.extend(str(a) for a in args)
    return argv


def working_dir(options: Mapping[str, Any], conf: Mapping[str, Any]) -> str:
    base = options.get("defined_in") or os.getcwd()
    cwd = options.get("cwd")
    if cwd:
        return os.path.normpath(os.path.join(base, str(cwd)))
    configured = conf.get("topology.multilang.resources.dir")
    if configured:
        return str(configured)
    resources = os.path.join(base, "resources")
    return resources if os.path.isdir(resources) else base


def child_env(extra: Mapping[str, Any] | None, codec_name: str) -> dict[str, str]:
    """The parent's environment, then ``extra`` (a ``PATH`` entry is appended, as Storm does)."""
    env = dict(os.environ)
    for key, value in (extra or {}).items():
        if key == "PATH" and env.get("PATH"):
            env[key] = f"{env['PATH']}{os.pathsep}{value}"
        else:
            env[key] = str(value)
    env[SERIALIZER_ENV] = codec_name
    return env


def resolve(options: Mapping[str, Any], conf: Mapping[str, Any], component: str) -> ShellSettings:
    serializer = conf.get("topology.multilang.serializer") or JSON_SERIALIZER
    try:
        codec = codec_for(serializer)
    except ValueError as e:
        raise ConfigError(str(e)) from e
    timeout_key = "topology.subprocess.timeout.secs"
    if conf.get(timeout_key) is None:
        timeout_key = "supervisor.worker.timeout.secs"
    max_pending = conf.get("topology.shellbolt.max.pending", DEFAULT_MAX_PENDING)
    if isinstance(max_pending, bool) or not isinstance(max_pending, int) or max_pending < 1:
        msg = f"config 'topology.shellbolt.max.pending' must be an integer > 0, got {max_pending!r}"
        raise ConfigError(msg)
    max_message = conf.get(MAX_MESSAGE_KEY, DEFAULT_MAX_MESSAGE_BYTES)
    if isinstance(max_message, bool) or not isinstance(max_message, int) or max_message < 1:
        msg = f"config {MAX_MESSAGE_KEY!r} must be an integer > 0, got {max_message!r}"
        raise ConfigError(msg)
    metrics = options.get("metrics")
    return ShellSettings(
        argv=command_line(options, component),
        cwd=working_dir(options, conf),
        env=child_env(options.get("env"), codec.name),
        codec=codec,
        timeout=_number(conf, timeout_key, DEFAULT_TIMEOUT_SECS, 0.001),
        max_pending=max_pending,
        max_message_bytes=max_message,
        heartbeat_secs=float(options.get("heartbeat_secs") or HEARTBEAT_SECS),
        restart_initial=_number(conf, "supervisor.worker.restart.backoff.initial.secs", 1.0, 0),
        restart_max=_number(conf, "supervisor.worker.restart.backoff.max.secs", 30.0, 0),
        tap_dir=conf.get("topology.multilang.tap.dir"),
        metrics=None if metrics is None else frozenset(metrics),
    )


def pid_dir(conf: Mapping[str, Any], topology: str, worker: str) -> tuple[str, bool]:
    """Where children write their pid files, and whether it is ours to remove.

    A worker process uses ``<its directory>/pids`` (``squall.worker.dir``;
    Storm's ``<storm.local.dir>/workers/<worker-id>/pids``), where its
    supervisor looks for children it left behind; without one,
    ``<storm.local.dir>/workers/<topology>-<worker>/pids``.  Local mode (an
    ``inproc://`` worker) takes a fresh temporary directory, so that tests
    leave nothing behind.  Absolute paths: children run elsewhere.
    """
    worker_dir = conf.get(config.WORKER_DIR)
    if worker_dir and not worker.startswith("inproc://"):
        path = os.path.join(os.path.abspath(str(worker_dir)), config.WORKER_PIDS)
        os.makedirs(path, exist_ok=True)
        return path, False
    local = conf.get("storm.local.dir")
    if local and not worker.startswith("inproc://"):
        worker_id = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{topology}-{worker}").strip("_")
        path = os.path.join(os.path.abspath(str(local)), "workers", worker_id, "pids")
        os.makedirs(path, exist_ok=True)
        return path, False
    return tempfile.mkdtemp(prefix="squall-pids-"), True
