"""A cluster's environment builds: pip runs the submitter's code, so it runs in the
worker sandbox's machinery (squall.runtime.sandbox).

A requirement can make pip run code its submitter chose: an sdist's build
backend, a checkout's ``setup.py``, a wheel's dependency named by URL.  So a
daemon (nimbus, a supervisor) builds an environment:

* only as the cluster's policy allows (squall.runtime.envs.BuildPolicy: wheels
  from the index unless the admin lists more), checked before anything runs;
* as root: pip as a uid of ``squall.env.build.uids`` of its own, one per build
  at once, in bubblewrap: strict (none of the host's files but the system's
  and Python's; the environment being built is its only writable directory,
  the allowed paths its requirements name are shown read only), with the
  network (pip needs the index), a fixed environment (never the daemon's:
  no keyring path, no token), its home and temporary files inside the
  environment, and resource limits.  The tree is then handed back to the
  daemon's user, readable by all (workers read it) and writable by no
  builder, so a later build as the same uid cannot change it;
* not root: the same sandbox as the daemon's own user in a user namespace;
  no working sandbox, pip runs as that user, with the same fixed environment;
* as root without a working sandbox: not at all (pip never runs as root).

pip's whole output goes to the daemon's log under a reference
(``env-<8 hex>``); the caller is told a few of pip's own ``ERROR:`` lines and
the reference, never the output (a build backend prints what it likes).
"""

from __future__ import annotations

import dataclasses
import os
import pwd
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import structlog

from squall.config import DEFAULTS
from squall.errors import ConfigError, SquallError
from squall.runtime import sandbox
from squall.runtime.envs import BuildPolicy, Requirements
from squall.runtime.sandbox import Identity, Limits, Sandbox, can_switch_users, pick_uid
from squall.security.redact import redact_text

log = structlog.get_logger("squall.runtime.buildbox.Builder")

UIDS_KEY = "squall.env.build.uids"
ENVIRONMENT_KEY = "squall.env.build.environment"
WORK = ".build"  # in the environment being built: the build's home and temporary files, removed after
# What one build may use: enough to compile a C extension, not to fill the host at once.  The
# CPU limit is per process; the wall clock is supervisor.env.build.timeout.secs.
LIMITS = Limits(address_space=8 << 30, processes=512, file_size=4 << 30, open_files=4096)
PATH = "/usr/local/bin:/usr/bin:/bin"
# pip's site-wide config (the cluster's index): all of /etc is shown to a build as another
# user; as the daemon's own user only the sandbox's few files and these.
PIP_CONFIG = ("/etc/pip.conf", "/etc/xdg/pip")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
OUTPUT_HEAD = 16 * 1024  # bytes of the output logged from its start ...
OUTPUT_TAIL = 240 * 1024  # ... and from its end, where pip says what failed
ERRORS_SHOWN = 5
ERROR_CHARS = 300
KILL_WAIT_SECS = 10
BUILD_UMASK = 0o022  # an environment is readable by all: workers run as other users read it


@dataclass(frozen=True)
class Outcome:
    """One pip run: its exit (None: killed at the timeout), the log reference, the
    ``ERROR:`` lines the caller may show, and the environment's size once handed back."""

    returncode: int | None
    reference: str
    errors: tuple[str, ...]
    constraint: bool  # pip named one of Squall's pins ("(constraint)") as the conflict
    size: int


class Builder:
    """How a daemon runs pip; whether it can sandbox it is decided once, at the first build
    (a probe of about 0.2 s) or at :meth:`start`."""

    def __init__(self, conf: Mapping[str, Any], daemon: str, timeout_secs: float) -> None:
        settings = {**DEFAULTS, **conf}  # tests build daemons from a partial conf
        self.policy = BuildPolicy.from_conf(settings)
        self.uids = uid_range(settings[UIDS_KEY])
        self.environment = extra_environment(settings[ENVIRONMENT_KEY])
        self.daemon = daemon
        self.timeout_secs = timeout_secs
        self._lock = threading.Lock()
        self._busy: set[int] = set()
        self._decided = False
        self.sandboxed = False
        self.refusal: str | None = None  # why nothing is built here (root without a sandbox)

    def admit(self, requirements: Requirements) -> tuple[str, ...]:
        """The local paths the requirements name, or SquallError: refused by the policy."""
        return self.policy.check(requirements)

    def start(self) -> None:
        with self._lock:
            if self._decided:
                return
            identity = Identity(self.uids[0], self.uids[0]) if can_switch_users() else None
            why = sandbox.unavailable(identity)
            self.sandboxed, self._decided = why is None, True
            if why is not None and identity is not None:
                self.refusal = (f"this {self.daemon} runs as root and cannot sandbox a build ({why}): it "
                                f"builds no environment, as pip would run the requirements' code as root")
        if why is None:
            log.info("environment builds sandboxed", as_other_users=identity is not None)
        elif self.refusal is not None:
            log.error("environment builds refused: no sandbox, and pip never runs as root", why=why)
        else:
            log.warning("environment builds not sandboxed: a build that runs code (an allowed sdist) runs "
                        "it as this daemon's user", why=why)

    def run(self, env: Path, command: list[str], paths: tuple[str, ...]) -> Outcome:
        """``command`` (pip, from ``env``'s Python) in ``env``'s sandbox; ``paths``: what
        :meth:`admit` returned.  SquallError when it cannot run at all."""
        self.start()
        if self.refusal is not None:
            raise SquallError(self.refusal)
        shown = shown_paths(paths, self.policy.paths)
        identity = self._take_identity()
        reference = f"env-{os.urandom(4).hex()}"
        started = time.monotonic()
        try:
            work = env / WORK
            for sub in ("home", "tmp"):
                (work / sub).mkdir(parents=True, exist_ok=True)
            if identity is not None:
                own_tree(str(env), identity.uid, identity.gid)
            with tempfile.TemporaryFile(prefix="squall-build-") as output:
                returncode = self._pip(env, command, shown, identity, output)
                text = logged_output(output)
        finally:
            # The store's marks at the top (.ready, .build) are the daemon's to write: one the
            # build left is gone (rmtree is fd-based: no link in it is followed).
            for target in env.glob(".*") if env.is_dir() else []:
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target, ignore_errors=True)
                else:
                    target.unlink(missing_ok=True)
            size, removed = own_tree(str(env), os.getuid(), os.getgid())
            self._release(identity)
        secs = round(time.monotonic() - started, 2)
        said = log.info if returncode == 0 else log.warning
        said("environment build output", reference=reference, env=env.name, exit=returncode, secs=secs,
             uid=identity.uid if identity is not None else os.getuid(), sandboxed=self.sandboxed,
             removed_links=removed, output=text)
        return Outcome(returncode, reference, error_lines(text), "(constraint)" in text, size)

    def _pip(self, env: Path, command: list[str], shown: list[str], identity: Identity | None,
             output: IO[bytes]) -> int | None:
        build_env = environment(str(env), identity, self.environment)
        limits = dataclasses.replace(LIMITS, cpu_secs=int(self.timeout_secs) + 1,
                                     # counted per uid: as the daemon's own, its processes would count too
                                     processes=LIMITS.processes if identity is not None else None)
        if not self.sandboxed:
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=output,
                                    stderr=subprocess.STDOUT, cwd=env, env=build_env, preexec_fn=limits.apply,
                                    start_new_session=True, umask=BUILD_UMASK)
            return self._wait(proc, None)
        read_end, write_end = os.pipe()
        box = build_box(str(env), identity, shown, write_end)
        try:
            # umask 022: what bwrap makes on the way to a named path (as root) must let the builder pass
            proc = subprocess.Popen(sandbox.argv(box, command), stdin=subprocess.DEVNULL, stdout=output,
                                    stderr=subprocess.STDOUT, cwd=env, env=build_env, pass_fds=(write_end,),
                                    preexec_fn=limits.apply, start_new_session=True, umask=BUILD_UMASK)
        except OSError:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        return self._wait(proc, sandbox.child_pid(read_end))

    def _wait(self, proc: subprocess.Popen[bytes], child: int | None) -> int | None:
        """pip's exit, or None once the timeout killed it.  The sandbox's first process is its
        pid namespace's: killing it kills every process the build started."""
        try:
            return proc.wait(self.timeout_secs)
        except subprocess.TimeoutExpired:
            kills = [(os.killpg, proc.pid)] + ([(os.kill, child)] if child is not None else [])
            for kill, pid in reversed(kills):  # the namespace first, then bwrap and its session
                try:
                    kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                proc.wait(KILL_WAIT_SECS)
            except subprocess.TimeoutExpired:
                log.error("an environment build's sandbox did not die", pid=proc.pid)
            return None

    def _take_identity(self) -> Identity | None:
        """A uid of the pool no build under way has (the daemon's own user when not root)."""
        if not can_switch_users():
            return None
        first, last = self.uids
        with self._lock:
            uid = pick_uid(self._busy, first, last)
            if uid is None:
                msg = f"all {last - first + 1} uids of {UIDS_KEY} are building; try again shortly"
                raise SquallError(msg)
            self._busy.add(uid)
        return Identity(uid, uid)

    def _release(self, identity: Identity | None) -> None:
        if identity is not None:
            with self._lock:
                self._busy.discard(identity.uid)


def uid_range(uids: Any) -> tuple[int, int]:
    if not (isinstance(uids, list) and len(uids) == 2 and uids[0] <= uids[1]
            and all(isinstance(u, int) and not isinstance(u, bool) and u > 0 for u in uids)):
        msg = f"config {UIDS_KEY!r} must be [first, last], two uids, got {uids!r}"
        raise ConfigError(msg)
    return uids[0], uids[1]


def extra_environment(values: Any) -> dict[str, str]:
    if not isinstance(values, Mapping) or not all(
            isinstance(k, str) and ENV_NAME.match(k) and isinstance(v, str) for k, v in values.items()):
        msg = f"config {ENVIRONMENT_KEY!r} must map variable names to strings"
        raise ConfigError(msg)
    return dict(values)


def environment(env: str, identity: Identity | None, extra: Mapping[str, str]) -> dict[str, str]:
    """A build's whole environment: the admin's few variables, then Squall's own (home,
    temporary files and pip's cache in the build's directory, gone after it)."""
    name = identity.name if identity is not None else pwd.getpwuid(os.getuid()).pw_name
    work = f"{env}/{WORK}"
    return {**extra, "PATH": f"{env}/bin:{PATH}", "HOME": f"{work}/home", "TMPDIR": f"{work}/tmp",
            "USER": name, "LOGNAME": name, "LANG": "C.UTF-8", "PYTHONNOUSERSITE": "1",
            "PIP_NO_CACHE_DIR": "1", "PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def build_box(env: str, identity: Identity | None, shown: Iterable[str], info_fd: int | None = None,
              exists: Callable[[str], bool] = os.path.exists) -> Sandbox:
    """The sandbox of one build of ``env``: strict, the network on, ``env`` its only
    writable directory, ``shown`` (:func:`shown_paths`) read only."""
    read = [p for p in PIP_CONFIG if exists(p)] if identity is None else []
    return Sandbox(cwd=env, identity=identity, read=[*read, *shown], write=[env], network=True, strict=True,
                   die_with_parent=True, info_fd=info_fd)


def shown_paths(paths: tuple[str, ...], allowed: tuple[str, ...]) -> list[str]:
    """The paths a build may read, checked again on the disk: a link inside an allowed
    directory may lead out of it.  One reached through a link is refused (bound at its
    own name it would lead nowhere in the sandbox): name its real path."""
    roots = [os.path.realpath(d) for d in allowed]
    for path in paths:
        real = os.path.realpath(path)
        if not any(real == r or real.startswith(r.rstrip("/") + "/") for r in roots):
            msg = f"{path} leads to {real}, which is not under a directory of squall.env.build.paths"
            raise SquallError(msg)
        if real != path:
            msg = f"{path} is reached through a link: name its real path, {real}"
            raise SquallError(msg)
        if not os.path.exists(real):
            msg = f"{path} does not exist on this node"
            raise SquallError(msg)
    return list(paths)


def own_tree(top: str, uid: int, gid: int) -> tuple[int, int]:
    """Make the tree at ``top`` ``uid``'s, readable by all and writable by its owner only,
    following no link: a file is changed through a descriptor opened without following
    one, a link itself is only re-owned, and a file with a second name (a hard link, which
    may be another file's) or of another kind (a fifo, a socket) is removed from the tree.
    (The size of its files, how many entries were removed.)"""
    size = removed = 0
    for _dirpath, dirnames, filenames, dirfd in os.fwalk(top, follow_symlinks=False):
        os.fchown(dirfd, uid, gid)
        os.fchmod(dirfd, 0o755)
        for name in filenames + dirnames:  # a link to a directory is among dirnames, not walked
            st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                continue  # its own turn in the walk
            if stat.S_ISLNK(st.st_mode):
                os.chown(name, uid, gid, dir_fd=dirfd, follow_symlinks=False)
                continue
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dirfd)
            except OSError:
                fd = -1  # a socket, or a link put in its place since: removed
            try:
                st = os.fstat(fd) if fd >= 0 else st
                if fd < 0 or not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
                    os.unlink(name, dir_fd=dirfd)
                    removed += 1
                    continue
                os.fchown(fd, uid, gid)
                os.fchmod(fd, (st.st_mode & 0o755) | 0o444)  # no setuid, no one else's write
                size += st.st_size
            finally:
                if fd >= 0:
                    os.close(fd)
    return size, removed


def logged_output(output: IO[bytes]) -> str:
    """The output as the log takes it: whole up to OUTPUT_HEAD + OUTPUT_TAIL bytes, else its
    start and its end with what was left out said between them."""
    size = output.seek(0, os.SEEK_END)
    output.seek(0)
    if size <= OUTPUT_HEAD + OUTPUT_TAIL:
        return output.read().decode("utf-8", "replace")
    head = output.read(OUTPUT_HEAD).decode("utf-8", "replace")
    output.seek(size - OUTPUT_TAIL)
    tail = output.read().decode("utf-8", "replace")
    return f"{head}\n[... {size - OUTPUT_HEAD - OUTPUT_TAIL} bytes left out ...]\n{tail}"


def error_lines(text: str) -> tuple[str, ...]:
    """pip's own ``ERROR:`` lines (a build's output, which pip indents, is not among them):
    the last few, each cut short, with what looks like a credential hidden."""
    found = [line for line in text.splitlines() if line.startswith("ERROR: ")]
    return tuple(redact_text(line[:ERROR_CHARS] + ("..." if len(line) > ERROR_CHARS else ""))
                 for line in found[-ERRORS_SHOWN:])
