"""``--requirements PATH`` of ``squall submit`` and ``squall local``: a topology's own
dependencies (docs/dependencies.md).

``submit`` sends the normalised requirements with the topology; nimbus builds
the environment before it takes the topology in, and each supervisor before it
launches the workers.  ``local`` builds it here (the same builder, cached under
``$SQUALL_ENV_CACHE`` or ``~/.cache/squall/envs``) and runs the command again
with the environment's Python.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from squall.errors import SquallError
from squall.runtime.envbuild import EnvStore, key_of
from squall.runtime.envs import Requirements, read

ACTIVE = "SQUALL_ENV"  # the hash of the environment this process runs in (set on the re-exec)
CACHE_DAYS = "SQUALL_ENV_CACHE_DAYS"
REQUIREMENTS_HELP = ("a pip requirements file (e.g. virtualenvs/NAME.txt) or a pyproject.toml: the "
                     "topology's workers run in a virtualenv with these installed (docs/dependencies.md)")


def load(path: str) -> Requirements:
    """The requirements of ``path``, with a note on stderr for each line Squall provides."""
    file = Path(path).resolve()
    try:
        text = file.read_text()
    except OSError as e:
        msg = f"--requirements {path}: {e.strerror or e}"
        raise SquallError(msg) from e

    def read_nested(name: str) -> str:
        try:
            return Path(name).read_text()
        except OSError as e:
            msg = f"{path}: the requirements file {name} it names: {e.strerror or e}"
            raise SquallError(msg) from e

    requirements = read(path, text, str(file.parent), read_nested)
    for note in requirements.notes:
        print(f"note: {note}", file=sys.stderr)
    return requirements


def count(requirements: Requirements) -> str:
    n = requirements.count
    return f"{n} requirement" + ("" if n == 1 else "s")


def describe_remote(requirements: Requirements, said: Any) -> str:
    """What submit prints of the environment nimbus answered with."""
    if not isinstance(said, dict) or not isinstance(said.get("key"), str):
        return f"environment ({count(requirements)}): nimbus did not say (an older nimbus?)"
    short = said["key"][:12]
    if said.get("built"):
        return f"environment {short} ({count(requirements)}): built on nimbus in {said.get('secs', 0):.1f} s"
    return f"environment {short} ({count(requirements)}): cached on nimbus"


def cache_dir() -> Path:
    configured = os.environ.get("SQUALL_ENV_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "squall" / "envs"


def cache_days() -> float:
    """``$SQUALL_ENV_CACHE_DAYS``: how long local mode keeps an environment no run has used
    (30 days unless set; 0 keeps them all)."""
    text = os.environ.get(CACHE_DAYS, "30")
    try:
        days = float(text)
    except ValueError:
        days = -1.0
    if not days >= 0:  # NaN too
        msg = f"${CACHE_DAYS} must be a number of days >= 0 (0: never remove), not {text!r}"
        raise SquallError(msg)
    return days


def run_in_environment(path: str, argv: list[str]) -> None:
    """Local mode: return if this process already runs in the environment of ``path``;
    else build it (or find it cached) and run ``squall ARGV`` again with its Python.

    The run holds its environment (a shared lock, kept across the exec) for as long as
    it lasts, and removes the cached environments no run has used for ``cache_days()``."""
    requirements = load(path)
    if not requirements.lines:
        return
    key = key_of(requirements)
    if os.environ.get(ACTIVE) == key:
        return
    store = EnvStore(cache_dir())

    def building(key: str) -> None:
        print(f"building environment {key[:12]} ({count(requirements)})...", end="", flush=True)

    days = cache_days()  # a bad value is said before anything is built
    held = None
    for _attempt in range(3):  # another run's sweep may remove it between the two
        try:
            env = store.ensure(requirements, building)
        except SquallError:
            print(" failed", flush=True)
            raise
        held = store.hold(key)
        if held is not None:
            break
    if held is None:
        msg = f"environment {key[:12]} in {store.root} was removed as soon as it was ready, three times"
        raise SquallError(msg)
    os.set_inheritable(held, True)
    print(f" done in {env.secs:.1f} s" if env.built else f"environment {key[:12]} cached", flush=True)
    if days:
        removed = store.sweep_unused(days * 86400, time.time(), keep={key})
        if removed:
            print(f"removed {len(removed)} cached environment(s) unused for {days:g} days", flush=True)
    python = str(env.python)
    os.execve(python, [python, "-m", "squall.cli", *argv], {**os.environ, ACTIVE: key})
