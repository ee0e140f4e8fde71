"""Nimbus's side of the check that a submitted package's classes load: it unpacks the
package, runs the import in a child where the package's code cannot reach nimbus's
keys, and judges the child's verdict.

Importing a module runs its code.  Nimbus does it in the child,
:mod:`squall.nimbus.sandboxed_import`, inside a strict sandbox
(:mod:`squall.runtime.sandbox`): no network, nothing of the host's files but the
system's and Python's, the unpacked package its only writable directory, a pid
namespace of its own (no daemon's ``/proc/<pid>`` to read; killing the sandbox's bwrap
takes every process it started with it), and resource limits.  Nimbus as root runs each
verification as a uid of ``nimbus.verify.uids`` of its own; not root, as its own user in
a user namespace.

What the child prints is for nimbus's log (redacted, its tail only) under a
reference that the submitter's 400 answer names; the answer holds only the
verdict :mod:`squall.nimbus.sandboxed_import` wrote.

Where no sandbox works (no bubblewrap, or it fails on this kernel) nimbus
imports nothing (``nimbus.verify.sandbox: auto``) or refuses to start
(``required``); ``squall submit`` has loaded every class on the client.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pwd
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import psutil
import structlog

from squall.errors import ConfigError, InvalidRequest, Unavailable
from squall.runtime import sandbox
from squall.runtime.package import extract
from squall.runtime.sandbox import Identity, Limits, Sandbox, can_switch_users, pick_uid, unavailable

log = structlog.get_logger("squall.nimbus.package_verifier.Verifier")

MODES = ("auto", "required", "off")
# What one verification may use: constants, not config, as importing a package needs
# no more on any cluster (a package that does is refused, and checked by its client).
LIMITS = Limits(cpu_secs=60, address_space=4 << 30, processes=64, file_size=64 << 20, open_files=256)
OUTPUT_LOGGED = 4096  # bytes of the child's output (its tail) that nimbus logs
VERDICT_MAX = 16 * 1024
ERROR_MAX = 1000  # characters of the verdict's error in the answer
KILL_WAIT_SECS = 10
ENV_PASSED = ("PATH", "LANG", "LC_ALL", "TZ", "PYTHONPATH")
# The package's directory is the child's working directory but not on its import path
# until squall.nimbus.sandboxed_import is loaded (``-m`` would put it first): a package's own
# squall/ shadows nothing of Squall's.
ENTRY = ("import sys; sys.path = [p for p in sys.path if p]; "
         "from squall.nimbus.sandboxed_import import main; sys.exit(main(sys.argv[1:]))")


class Verifier:
    """Runs one sandboxed import per submit; decides once, at :meth:`start`, whether any."""

    def __init__(self, conf: dict[str, Any], now: Callable[[], float] = time.monotonic) -> None:
        self.conf = conf
        self.now = now
        self._lock = threading.Lock()
        self._busy: set[int] = set()  # uids of verifications under way
        self._started = False
        self.off: str | None = None  # why packages are not imported (None: they are)

    def start(self) -> None:
        """Decide whether packages are imported here (a probe of about 0.2 s, once)."""
        with self._lock:
            if self._started:
                return
            mode = self.conf["nimbus.verify.sandbox"]
            if mode not in MODES:
                msg = f"config 'nimbus.verify.sandbox' must be one of {', '.join(MODES)}, got {mode!r}"
                raise ConfigError(msg)
            first, _last = self._uids()
            why = "nimbus.verify.sandbox is off" if mode == "off" else unavailable(self._identity(first))
            if why is not None and mode == "required":
                msg = f"nimbus.verify.sandbox is 'required' and no sandbox works here: {why}"
                raise ConfigError(msg)
            self.off, self._started = why, True
        if why is not None:
            log.warning(f"package verification off: {why}; submitted code is checked by the client only")
        else:
            log.info("package verification sandboxed", switch_users=can_switch_users())

    def _uids(self) -> tuple[int, int]:
        uids = self.conf["nimbus.verify.uids"]
        if not (len(uids) == 2 and all(isinstance(u, int) and not isinstance(u, bool) and u > 0 for u in uids)
                and uids[0] <= uids[1]):
            msg = f"config 'nimbus.verify.uids' must be [first, last], two uids, got {uids!r}"
            raise ConfigError(msg)
        return uids[0], uids[1]

    @staticmethod
    def _identity(uid: int) -> Identity | None:
        return Identity(uid, uid) if can_switch_users() else None

    def verify(self, definition: dict[str, Any], blob: bytes, env: Path | None = None) -> None:
        """Unpack the package (a bad one is refused, even where nothing is imported), then
        import every class the definition names; InvalidRequest when the package is refused
        (Unavailable when it cannot be verified now).
        ``env``: the topology's environment (squall.runtime.envbuild), whose Python imports
        it, as its workers' will."""
        self.start()
        with tempfile.TemporaryDirectory(prefix="squall-verify-", ignore_cleanup_errors=True) as work:
            code = os.path.join(work, "code")
            os.mkdir(code, 0o700)
            if blob:
                try:
                    extract(blob, code, max_bytes=self.conf["nimbus.code.max.uncompressed.bytes"],
                            max_entries=self.conf["nimbus.code.max.entries"])
                except Exception as e:  # noqa: BLE001 - a corrupt or oversized zip is bad input
                    raise InvalidRequest(f"the code package is refused: {e}") from e
            if self.off is not None:
                return
            uid = self._take_uid()
            try:
                self._run(definition, work, code, self._identity(uid), env)
            finally:
                with self._lock:
                    self._busy.discard(uid)

    def _take_uid(self) -> int:
        """A uid of the pool no verification under way has (the pool caps how many run at
        once, also when nimbus is not root and every one runs as nimbus's user)."""
        first, last = self._uids()
        with self._lock:
            uid = pick_uid(self._busy, first, last)
            if uid is None:
                msg = f"too many verifications at once ({last - first + 1}); submit again shortly"
                raise Unavailable(msg)
            self._busy.add(uid)
            return uid

    def _run(self, definition: dict[str, Any], work: str, code: str, identity: Identity | None,
             env: Path | None = None) -> None:
        reference = f"verify-{os.urandom(3).hex()}"
        nonce = os.urandom(16).hex()
        if identity is not None:
            chown_tree(code, identity)
        # RLIMIT_NPROC counts per user: as nimbus's own user it would count nimbus's processes
        # too, so the child sets it itself, inside its user namespace.
        limits = LIMITS if identity is not None else dataclasses.replace(LIMITS, processes=None)
        inside = {} if identity is not None else {"processes": LIMITS.processes}
        request = json.dumps({"definition": definition, "nonce": nonce, "limits": inside}).encode()
        box = Sandbox(cwd=code, identity=identity, write=[code], network=False, strict=True,
                      die_with_parent=True, read=[str(env)] if env is not None else [])
        python = str(env / "bin" / "python") if env is not None else sys.executable
        timeout = self.conf["nimbus.verify.timeout.secs"]
        started = self.now()
        with ExitStack() as stack:
            output = stack.enter_context(open(os.path.join(work, "output"), "w+b"))
            read_end, write_end = os.pipe()
            stack.callback(os.close, read_end)
            try:
                proc = subprocess.Popen(
                    sandbox.command(box, [python, "-c", ENTRY, code, str(write_end)]),
                    stdin=subprocess.PIPE, stdout=output, stderr=subprocess.STDOUT, cwd=code,
                    env=child_env(code, identity), pass_fds=(write_end,), preexec_fn=limits.apply,
                    start_new_session=True)
            except OSError as e:
                msg = f"the package could not be verified: {e}"
                raise Unavailable(msg) from e
            finally:
                os.close(write_end)
            try:
                proc.communicate(request, timeout=timeout)
            except subprocess.TimeoutExpired:
                kill_sandbox(proc)
                log.warning("package verification timed out", reference=reference, secs=timeout,
                            output=tail(output))
                msg = (f"importing the topology's code did not finish in {timeout} s "
                       f"(nimbus log reference {reference})")
                raise InvalidRequest(msg) from None
            why = judge(read_verdict(read_end, nonce), proc.returncode)
            ms = round((self.now() - started) * 1000)
            if why is None:
                log.info("package verified", reference=reference, ms=ms, output=tail(output))
                return
            log.warning("package refused", reference=reference, reason=why, ms=ms, output=tail(output))
            raise InvalidRequest(f"{why} (nimbus log reference {reference})")


def child_env(code: str, identity: Identity | None) -> dict[str, str]:
    """Nothing of nimbus's environment but the basics; home and temporary files in the package."""
    env = {k: os.environ[k] for k in ENV_PASSED if k in os.environ}
    env.setdefault("PATH", "/usr/bin:/bin")
    name = identity.name if identity is not None else pwd.getpwuid(os.getuid()).pw_name
    return {**env, "HOME": code, "TMPDIR": code, "USER": name, "LOGNAME": name,
            "PYTHONUNBUFFERED": "1"}  # its prints and tracebacks logged in the order they came


def chown_tree(path: str, identity: Identity) -> None:
    """The unpacked package made the sandbox user's (nothing in it is a symlink: extract refuses them)."""
    os.lchown(path, identity.uid, identity.gid)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), identity.uid, identity.gid)


def kill_sandbox(proc: subprocess.Popen[bytes]) -> None:
    """Every process of the sandbox, and bwrap with its session.

    The pid namespace dies with its first process, and ``--die-with-parent`` takes
    that one with bwrap, but not when the command itself is that first process
    (``--as-pid-1``) and has switched users: a new uid clears the parent-death
    signal.  So bwrap's descendants are killed by pid too (an orphan inside is
    reparented to the namespace's first process, so none is missed)."""
    try:
        inside = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        inside = []
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for member in inside:
        try:
            member.kill()
        except psutil.Error:
            pass
    proc.kill()
    try:
        proc.wait(KILL_WAIT_SECS)
    except subprocess.TimeoutExpired:
        pass
    _gone, alive = psutil.wait_procs(inside, timeout=KILL_WAIT_SECS)
    if alive or proc.returncode is None:
        log.error("the verification's sandbox did not die", pids=[proc.pid, *(p.pid for p in alive)])


def read_verdict(fd: int, nonce: str) -> dict[str, Any] | None:
    """The child's verdict if it said one with ``nonce`` (the last line; what is in the
    pipe once the sandbox is gone, read without waiting for more)."""
    os.set_blocking(fd, False)
    data = b""
    try:
        while len(data) < VERDICT_MAX and (chunk := os.read(fd, VERDICT_MAX - len(data))):
            data += chunk
    except BlockingIOError:
        pass
    lines = data.decode("utf-8", "replace").strip().splitlines()
    try:
        said = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
    return said if isinstance(said, dict) and said.get("nonce") == nonce else None


def judge(said: dict[str, Any] | None, returncode: int) -> str | None:
    """None when the package verified; else what the submitter is told."""
    if said is not None and said.get("ok") is True and returncode == 0:
        return None
    if said is not None and said.get("ok") is False and isinstance(said.get("error"), str):
        return str(said["error"][:ERROR_MAX])
    if returncode == 0:
        return "importing the topology's code ended the verification process before it reported success"
    return f"verifying the topology's code failed ({ended(returncode)})"


def tail(output: Any) -> str:
    size = output.seek(0, os.SEEK_END)
    output.seek(max(0, size - OUTPUT_LOGGED))
    text = output.read().decode("utf-8", "replace")
    return text if size <= OUTPUT_LOGGED else "..." + text


def ended(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"
