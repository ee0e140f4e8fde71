"""Building a topology's environment: a virtualenv per content hash
(squall.runtime.envs), in ``<dir>/<hash>/``, that sees Squall too.

* The stdlib ``venv`` makes it (without pip: Squall's own pip, seen through
  the path file below, installs into it, which saves ensurepip's seconds).
* ``_squall.pth`` in its site-packages hands it the site directories of the
  Python Squall runs from, after its own: the topology's versions win for its
  code, and Squall's engine and its dependencies are there for the worker.  A
  dependency pip finds there already is "already satisfied": not downloaded.
* A constraints file pins Squall's own runtime dependencies at the versions
  it runs with, so a requirement that would replace one fails the build with
  pip's own message instead of breaking the worker.
* One builder per hash on a node (a file lock); ``.ready`` is written last,
  and nothing without it is used: a half-built environment (a builder killed)
  is removed by the next one, and a failed build leaves nothing.
* Made readable by all (umask 022): workers run as other users read it, and
  it holds only public packages.
* A daemon's store has a Builder (squall.runtime.buildbox): the cluster's
  policy is checked first, and pip runs as user code (another uid, a sandbox,
  its output to the daemon's log under a reference).  Local mode has none:
  it builds what its user asks, as that user, as before.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import structlog
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from squall.errors import SquallError
from squall.runtime.buildbox import Builder
from squall.runtime.envs import Requirements, pins
from squall.security.files import write_private
from squall.version import VERSION

log = structlog.get_logger("squall.runtime.envbuild")

READY = ".ready"
LOCKS = ".locks"
PTH = "_squall.pth"
OUTPUT_TAIL = 15  # lines of pip's output in a failure's message
BUILD_UMASK = 0o022
CONSTRAINT_HINT = ("\n(a '(constraint)' in pip's words is a package Squall itself runs on, pinned at the "
                   "version this node has: the topology cannot replace it)")
PYTHON_TAG = f"{sys.implementation.cache_tag}-{'.'.join(map(str, sys.version_info[:3]))}"


class EnvBuildError(SquallError):
    """An environment could not be built; the message ends with pip's own words."""


class EnvRefused(EnvBuildError):
    """The cluster's policy does not build these requirements (nothing was run)."""


@dataclass(frozen=True)
class Environment:
    key: str
    path: Path
    built: bool  # False: it was in the cache
    secs: float

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"


def key_of(requirements: Requirements) -> str:
    """The environment's hash on this node (its Python, this Squall)."""
    return requirements.key(PYTHON_TAG, VERSION)


def site_dirs() -> list[str]:
    """Where the Python running Squall finds its packages (what the environment adds after
    its own), and the folder holding ``squall`` when it is not installed there (a checkout)."""
    paths = sysconfig.get_paths()
    dirs = [paths["purelib"], paths["platlib"]]
    holder = str(Path(__file__).resolve().parents[2])
    if not any(holder == d or holder.startswith(d.rstrip("/") + "/") for d in dirs):
        dirs.insert(0, holder)
    return list(dict.fromkeys(dirs))


def squall_constraints() -> list[str]:
    """``name==version`` of Squall's runtime dependencies and theirs, as installed here."""
    installed: dict[str, tuple[str, list[str]]] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if not name:
            continue
        requires = [r for r in (dist.requires or []) if _applies(r)]
        installed.setdefault(canonicalize_name(name), (dist.version, requires))
    try:
        roots = [r for r in (metadata.distribution("squall").requires or []) if _applies(r)]
    except metadata.PackageNotFoundError:
        return []  # run from a bare checkout: nothing to pin by
    return pins([Requirement(r).name for r in roots], installed)


def _applies(spec: str) -> bool:
    """A requirement of an installed package that applies here (no extra, markers true)."""
    try:
        req = Requirement(spec)
    except InvalidRequirement:
        return False
    return req.marker is None or req.marker.evaluate({"extra": ""})


class EnvStore:
    """A node's environments, under ``root`` (``<storm.local.dir>/envs``)."""

    def __init__(self, root: Path, timeout_secs: float = 900.0, builder: Builder | None = None) -> None:
        self.root = root
        self.timeout_secs = timeout_secs
        self.builder = builder  # None: local mode's, pip as the user who asked
        self.builds = 0  # environments this process built

    def path(self, key: str) -> Path:
        return self.root / key

    def ready(self, key: str) -> bool:
        """Whether ``key`` is built: its ``.ready`` is there, a file of this process's user (one
        a build as another uid planted while it ran does not count)."""
        try:
            st = os.lstat(self.path(key) / READY)
        except OSError:
            return False
        return stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()

    def admit(self, requirements: Requirements) -> tuple[str, ...]:
        """The local paths ``requirements`` name, or EnvRefused when the cluster's policy does
        not build them (always checked: a cached environment of an older policy too)."""
        if self.builder is None:
            return ()
        try:
            return self.builder.admit(requirements)
        except SquallError as e:
            raise EnvRefused(str(e)) from e

    def size(self, key: str) -> int:
        """The bytes of a ready environment's files, as its builder counted them (0: unknown)."""
        try:
            said = json.loads((self.path(key) / READY).read_text())
        except (OSError, ValueError):
            return 0
        return said.get("bytes", 0) if isinstance(said, dict) and isinstance(said.get("bytes"), int) else 0

    def present(self) -> list[str]:
        try:
            return sorted(p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))
        except OSError:
            return []

    def _lock(self, key: str, blocking: bool = True, shared: bool = False) -> int | None:
        locks = self.root / LOCKS
        locks.mkdir(parents=True, exist_ok=True, mode=0o755)
        fd = os.open(locks / key, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return None
        return fd

    def ensure(self, requirements: Requirements,
               on_build: Callable[[str], None] | None = None) -> Environment:
        """The environment of ``requirements``, built if it is not in the cache (waiting
        for another builder of the same one); EnvBuildError with pip's words if it fails."""
        key = key_of(requirements)
        paths = self.admit(requirements)
        started = time.monotonic()
        if self.ready(key):
            return Environment(key, self.path(key), False, 0.0)
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)
        fd = self._lock(key)
        try:
            if self.ready(key):  # another builder finished it while we waited
                return Environment(key, self.path(key), False, time.monotonic() - started)
            if on_build is not None:
                on_build(key)
            self._build(key, requirements, paths)
            self.builds += 1
            secs = time.monotonic() - started
            log.info("environment built", key=key, requirements=requirements.count, secs=round(secs, 2))
            return Environment(key, self.path(key), True, secs)
        finally:
            assert fd is not None
            os.close(fd)

    def hold(self, key: str) -> int | None:
        """A shared lock on the ready environment ``key``, kept while the returned descriptor
        is open (across an exec too, once inheritable): :meth:`remove` leaves it alone.  It
        marks the environment used now (what :meth:`sweep_unused` reads).  None if it is not
        ready: removed since it was found."""
        fd = self._lock(key, shared=True)
        assert fd is not None
        if not self.ready(key):
            os.close(fd)
            return None
        try:
            os.utime(self.path(key) / READY)
        except OSError:  # another user's cache: it is used, just not marked so
            pass
        return fd

    def sweep_unused(self, max_age_secs: float, now: float, keep: Iterable[str] = ()) -> list[str]:
        """Remove the environments not used for ``max_age_secs`` (by :meth:`hold`'s mark, else
        since they were made), except ``keep`` and those a process holds or builds now."""
        removed = []
        for key in self.present():
            if key in keep:
                continue
            path = self.path(key)
            try:
                used = (path / READY if self.ready(key) else path).stat().st_mtime
            except OSError:
                continue
            if now - used >= max_age_secs and self.remove(key):
                removed.append(key)
        return removed

    def remove(self, key: str) -> bool:
        """Remove an environment, unless a builder or a user (:meth:`hold`) holds it."""
        fd = self._lock(key, blocking=False)
        if fd is None:
            return False
        try:
            path = self.path(key)
            if path.exists():
                (path / READY).unlink(missing_ok=True)  # first: never used half-removed
                shutil.rmtree(path, ignore_errors=True)
                log.info("environment removed", key=key)
            (self.root / LOCKS / key).unlink(missing_ok=True)
            return True
        finally:
            os.close(fd)

    def _build(self, key: str, requirements: Requirements, paths: tuple[str, ...] = ()) -> None:
        path = self.path(key)
        shutil.rmtree(path, ignore_errors=True)  # a builder that died left it half-built
        if self.builder is not None:
            self.builder.start()
            if self.builder.refusal is not None:
                raise EnvBuildError(self.builder.refusal)
        try:
            self._run([sys.executable, "-m", "venv", "--without-pip", str(path)], "creating the virtualenv")
            site = Path(sysconfig.get_path("purelib", vars={"base": str(path), "platbase": str(path)}))
            site.mkdir(parents=True, exist_ok=True)
            # Plain lines are appended to sys.path after this site-packages; addsitedir also reads
            # the .pth files there (an editable install of Squall, distutils' shim).
            lines = [f"import site; site.addsitedir({d!r})" for d in site_dirs()]
            (site / PTH).write_text("\n".join(lines) + "\n")
            os.chmod(site / PTH, 0o644)
            (path / "requirements.txt").write_text(requirements.text)
            (path / "squall-constraints.txt").write_text("".join(c + "\n" for c in squall_constraints()))
            python = path / "bin" / "python"
            pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
                   "--no-warn-script-location", "--no-user", "-r", str(path / "requirements.txt"),
                   "-c", str(path / "squall-constraints.txt")]
            what = f"installing the requirements of {requirements.source}"
            size = None
            if self.builder is None:
                self._run(pip, what)
            else:
                size = self._run_built(pip + self.builder.policy.pip_options(), what, path, paths)
            # Never through a name the build may have planted (a link to a daemon's file).
            write_private(path / READY, json.dumps({
                "key": key, "source": requirements.source, "requirements": list(requirements.lines),
                "python": sys.version, "squall": VERSION, **({"bytes": size} if size is not None else {})}),
                mode=0o644)
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)
            raise

    def _run_built(self, argv: list[str], what: str, path: Path, paths: tuple[str, ...]) -> int:
        """pip through the daemon's builder: the caller learns pip's ERROR lines and the log
        reference, never the output.  The environment's size."""
        assert self.builder is not None
        try:
            outcome = self.builder.run(path, argv, paths)
        except (SquallError, OSError) as e:
            msg = f"{what} could not start: {e}"
            raise EnvBuildError(msg) from e
        if outcome.returncode == 0:
            return outcome.size
        where = f"{self.builder.daemon} log reference {outcome.reference}"
        if outcome.returncode is None:
            msg = f"{what} did not finish in {self.timeout_secs:g} s ({where})"
            raise EnvBuildError(msg)
        said = "\n".join(outcome.errors) if outcome.errors else "(pip said no ERROR line)"
        msg = f"{what} failed (exit {outcome.returncode}; {where}):\n{said}"
        if outcome.constraint:
            msg += CONSTRAINT_HINT
        raise EnvBuildError(msg)

    def _run(self, argv: list[str], what: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_REQUIRE_VIRTUALENV")}
        env["PYTHONNOUSERSITE"] = "1"
        try:
            proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, env=env, umask=BUILD_UMASK,
                                  timeout=self.timeout_secs, check=False)
        except subprocess.TimeoutExpired as e:
            msg = f"{what} did not finish in {self.timeout_secs:g} s"
            raise EnvBuildError(msg) from e
        except OSError as e:
            msg = f"{what} could not start: {e}"
            raise EnvBuildError(msg) from e
        if proc.returncode != 0:
            output = proc.stdout.decode("utf-8", "replace").rstrip().splitlines()
            tail = "\n".join(output[-OUTPUT_TAIL:])
            msg = f"{what} failed (exit {proc.returncode}):\n{tail}"
            if "(constraint)" in tail:
                msg += CONSTRAINT_HINT
            raise EnvBuildError(msg)
