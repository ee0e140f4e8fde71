"""Running a topology's code where it cannot reach the daemons' keys: another
Unix user, namespaces of its own, resource limits.

Two users of it: nimbus imports a submitted package to check that its classes
load (``strict``: no network, nothing of the host's files but the system's and
Python's, read-only), and a supervisor runs a topology's workers (the host's
network and files, under Unix permissions, as the topology's own user).  Both
get a pid namespace (the whole tree dies with its first process, and no
daemon's ``/proc/<pid>`` is there to read), a private ``/tmp``, and a new
session.

The namespaces and mounts are bubblewrap's (Debian's ``bubblewrap``, the
sandbox Flatpak runs on).  Switching users needs root, as Storm's setuid
worker-launcher does: bubblewrap runs as root with only CAP_SETUID and
CAP_SETGID kept, and util-linux's ``setpriv`` drops to the identity inside,
with no supplementary groups, no capabilities and ``no_new_privs`` (no setuid
program can take it back).  Not root, the sandbox keeps the caller's user in a
user namespace of its own: the mounts still hide what is not bound in.

A directory on the way to something the sandbox needs may be private (0700:
``/root`` when Python lives in ``/root/.pyenv``, a supervisor's local dir
above a worker's slot).  It is replaced, inside the sandbox only, by an empty
directory holding just what was needed below it: the rest of it is not there
to read at all.
"""

from __future__ import annotations

import os
import resource
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import PurePosixPath

from squall.security.files import write_private

TOOL = "bwrap"
SETPRIV = "setpriv"
# Where a daemon finds bwrap and setpriv: a fixed path, never the PATH a process
# inherited (a topology's environment must not choose what a root launcher runs).
FIXED_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# systemd's range for dynamic users: never a login user's, and inside the 16-bit
# uid maps containers commonly have.
UID_RANGE = (61184, 65519)
SYSTEM_DIRS = ("/usr", "/opt")
# Of /etc, what a program as the caller's own user sees (another user may see it all:
# what is secret there is the owner's only).
ETC_FILES = ("/etc/ssl", "/etc/ca-certificates", "/etc/localtime", "/etc/hosts", "/etc/resolv.conf",
             "/etc/nsswitch.conf", "/etc/passwd", "/etc/group", "/etc/ld.so.cache", "/etc/alternatives")
MERGED_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


@dataclass(frozen=True)
class Identity:
    """A Unix user and group a sandbox runs as (no passwd entry needed)."""

    uid: int
    gid: int

    @property
    def name(self) -> str:
        return f"squall-{self.uid}"


@dataclass(frozen=True)
class Limits:
    """setrlimit values (None: inherited); core dumps are always off (a dump holds secrets)."""

    cpu_secs: int | None = None
    address_space: int | None = None
    processes: int | None = None
    file_size: int | None = None
    open_files: int | None = None

    def apply(self) -> None:
        """In the child before exec (Popen's preexec_fn): what it and its children may use."""
        for which, value in ((resource.RLIMIT_CPU, self.cpu_secs), (resource.RLIMIT_AS, self.address_space),
                             (resource.RLIMIT_NPROC, self.processes), (resource.RLIMIT_FSIZE, self.file_size),
                             (resource.RLIMIT_NOFILE, self.open_files)):
            if value is not None:
                resource.setrlimit(which, (value, value))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


@dataclass
class Sandbox:
    """What one sandboxed process sees and is.

    ``strict``: only the system's directories and Python's, read-only, and
    ``read``/``write``; else the host's whole tree (Unix permissions apply,
    private directories on the way to ``read``/``write`` opened as above).
    ``/tmp`` is always an empty tmpfs of its own (point TMPDIR at a written
    directory for large files)."""

    cwd: str
    identity: Identity | None = None
    read: list[str] = field(default_factory=list)
    write: list[str] = field(default_factory=list)
    network: bool = False
    strict: bool = True
    die_with_parent: bool = True
    # The command is the namespace's first process (no reaper above it), so its pid is
    # the sandbox's: a SIGKILL to it takes every process inside.  bubblewrap writes
    # {"child-pid": <its pid as seen from here>, ...} to this descriptor when set.
    info_fd: int | None = None
    # Host files shown at other paths, read only, over everything else (e.g. an
    # /etc/passwd naming the identity: see identity_files).
    overlay: dict[str, str] = field(default_factory=dict)
    # The command's whole environment, set by bubblewrap inside (None: bubblewrap's own,
    # passed on).  The process that starts bubblewrap then keeps the daemon's fixed one.
    env: dict[str, str] | None = None


@cache
def tool_path(name: str) -> str:
    """``name`` (bwrap, setpriv) as an absolute path found on :data:`FIXED_PATH`, once per
    process; the bare name if it is not there (running it then fails, and says so)."""
    return shutil.which(name, path=FIXED_PATH) or name


def command(box: Sandbox, cmd: list[str]) -> list[str]:
    """:func:`argv` with bubblewrap and setpriv as the absolute paths a daemon resolved."""
    return argv(box, cmd, tool=tool_path(TOOL), setpriv=tool_path(SETPRIV))


def hidden_options(args: list[str]) -> tuple[list[str], int]:
    """``args`` (from :func:`argv`) with bubblewrap's options moved into a memory file
    read through ``--args FD``: what they hold (a topology's environment) is not on a
    command line, which every user of the host may read.  Returns the new argv and the
    descriptor to pass on (the caller closes it once bubblewrap has started)."""
    end = args.index("--")
    fd = os.memfd_create("squall-bwrap-args", 0)
    data = b"".join(a.encode() + b"\0" for a in args[1:end])
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return [args[0], "--args", str(fd), *args[end:]], fd


def can_switch_users() -> bool:
    return os.geteuid() == 0


def pick_uid(taken: Iterable[int], first: int = UID_RANGE[0], last: int = UID_RANGE[1]) -> int | None:
    """The lowest uid of [first, last] not in ``taken``; None when all are."""
    used = set(taken)
    return next((uid for uid in range(first, last + 1) if uid not in used), None)


def runtime_paths() -> list[str]:
    """What this Python needs to run Squall: its prefixes, its import path and the
    interpreter's own directory (real paths, outermost only).

    Not the working directory: ``python -m`` puts it first on the import path, and a
    daemon's (a dev cluster's root, ``/``) holds its keys, not Python."""
    cwd = os.getcwd()
    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable)),
             os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]  # the folder holding squall/
    paths += [p for p in sys.path if p and os.path.isabs(p) and p != cwd]
    paths += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if os.path.isabs(p)]
    return outermost(os.path.realpath(p) for p in paths if os.path.exists(p))


def outermost(paths: Iterable[str]) -> list[str]:
    """``paths`` without duplicates or any path below another of them."""
    kept: list[str] = []
    for p in sorted(set(paths), key=lambda s: (s.count("/"), s)):
        if not any(_under(p, k) for k in kept):
            kept.append(p)
    return kept


def _under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def is_private(path: str) -> bool:
    """Whether a user other than the owner (and the group) cannot pass through ``path``."""
    try:
        return not os.stat(path).st_mode & stat.S_IXOTH
    except OSError:
        return False


def argv(box: Sandbox, command: list[str], tool: str = TOOL,
         private: Callable[[str], bool] = is_private, runtime: list[str] | None = None,
         exists: Callable[[str], bool] = os.path.lexists,
         readlink: Callable[[str], str] = os.readlink,
         isdir: Callable[[str], bool] = os.path.isdir, setpriv: str = SETPRIV) -> list[str]:
    """The command line that runs ``command`` in ``box`` (pure: the file system is asked
    through the callables, so a test can give any layout)."""
    args = [tool, "--unshare-pid", "--as-pid-1", "--unshare-ipc", "--unshare-uts", "--new-session"]
    if box.strict:
        # Not for a worker or the Spark server: the JVM's container detection fails on
        # /proc/self/cgroup paths that a cgroup namespace rewrites (an NPE at start).
        args.append("--unshare-cgroup-try")
    if box.info_fd is not None:
        args += ["--info-fd", str(box.info_fd)]
    if not box.network:
        args.append("--unshare-net")
    if box.die_with_parent:
        args.append("--die-with-parent")
    if box.identity is None:
        args.append("--unshare-user")  # not root: the caller's user, in a namespace of its own
    runtime = runtime_paths() if runtime is None else runtime
    read = outermost([*runtime, *box.read])
    write = outermost(box.write)
    # Nothing read-only above or below a writable path: a read-only view of a folder
    # holding one would show the private folders on the way as they are.
    read = [p for p in read if not any(_under(p, w) or _under(w, p) for w in write)]
    # Directories replaced by an empty one: the root itself when strict, /tmp always,
    # and (as another user) every private directory above a path the sandbox needs.
    shadows = {"/"} if box.strict else set()
    if box.identity is not None and not box.strict:
        for path in [*read, *write]:
            for parent in PurePosixPath(path).parents:
                if str(parent) != "/" and private(str(parent)):
                    shadows.add(str(parent))
    if box.strict:
        for d in MERGED_DIRS:
            if exists(d) and not isdir(d):
                args += ["--symlink", readlink(d), d]
            elif exists(d):
                args += ["--ro-bind", d, d]
        for d in (*SYSTEM_DIRS, *(("/etc",) if box.identity is not None else ETC_FILES)):
            if exists(d):
                args += ["--ro-bind", d, d]
    else:
        args += ["--bind", "/", "/"]
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += _mounts(shadows, read, write)
    for target, source in sorted(box.overlay.items()):
        args += ["--ro-bind", source, target]
    args += ["--chdir", box.cwd]
    if box.env is not None:
        args.append("--clearenv")
        for name, value in sorted(box.env.items()):
            args += ["--setenv", name, value]
    if box.identity is not None:
        uid, gid = box.identity.uid, box.identity.gid
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--",
                 setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--no-new-privs",
                 "--inh-caps=-all", "--"]
    else:
        args.append("--")
    return args + command


def _mounts(shadows: set[str], read: list[str], write: list[str]) -> list[str]:
    """Each shadow as an empty tmpfs (only the outermost: one inside another is made
    by the outer's) and a tmpfs /tmp, then every needed path below one, with the
    folders on the way."""
    tops = outermost(s for s in shadows if not _under(s, "/tmp"))
    out: list[str] = []
    for top in tops:
        if top != "/":
            out += ["--perms", "0755", "--tmpfs", top]
    out += ["--perms", "1777", "--tmpfs", "/tmp"]
    made = {*tops, "/tmp"}
    for path, flag in [*((p, "--ro-bind") for p in read), *((p, "--bind") for p in write)]:
        top = "/tmp" if _under(path, "/tmp") else next((t for t in tops if _under(path, t)), None)
        if top is None or path == top:
            continue  # visible as it is on the host
        for parent in reversed(PurePosixPath(path).parents):
            p = str(parent)
            if _under(p, top) and p not in made:
                out += ["--perms", "0755", "--dir", p]
                made.add(p)
        out += [flag, path, path]
        made.add(path)
    return out


def identity_files(identity: Identity, home: str, directory: str) -> dict[str, str]:
    """An /etc/passwd and /etc/group that also name ``identity`` (written into
    ``directory``, 0640 to its group), as :attr:`Sandbox.overlay`: a program that asks who it
    is (a JVM's Hadoop login, ``getpass.getuser()``) gets an answer."""
    out = {}
    user = f"{identity.name}:x:{identity.uid}:{identity.gid}::{home}:/usr/sbin/nologin"
    for name, line in (("passwd", user), ("group", f"{identity.name}:x:{identity.gid}:")):
        try:
            with open(f"/etc/{name}") as f:
                text = f.read()
        except OSError:
            text = ""
        path = os.path.join(directory, f".{name}")
        # Readable by the sandbox's group, and no one else's; written where the sandboxed
        # user may write too (its slot), so never through a name it could have planted.
        write_private(path, text.rstrip("\n") + "\n" + line + "\n", mode=0o640, group=identity.gid)
        out[f"/etc/{name}"] = path
    return out


def child_pid(info: int, timeout: float = 30.0) -> int | None:
    """The sandboxed process's pid, read from the read end of ``info_fd``'s pipe
    (closed here); None if bubblewrap said nothing (it failed) within ``timeout``."""
    import json
    import select

    data = b""
    try:
        while select.select([info], [], [], timeout)[0]:
            chunk = os.read(info, 4096)
            if not chunk:
                break
            data += chunk
            try:
                return int(json.loads(data)["child-pid"])
            except (ValueError, KeyError, TypeError):
                continue
    finally:
        os.close(info)
    return None


@cache
def unavailable(identity: Identity | None = None) -> str | None:
    """Why nothing can be sandboxed here (None: it can): a probe runs Python in a
    strict sandbox as ``identity`` and imports Squall's worker there."""
    if not os.path.isabs(tool_path(TOOL)):
        return f"{TOOL} is not installed in {FIXED_PATH} (Debian: apt-get install bubblewrap)"
    if identity is not None and not can_switch_users():
        return "switching users needs root"
    if not os.path.isabs(tool_path(SETPRIV)) and identity is not None:
        return f"{SETPRIV} (util-linux) is not installed in {FIXED_PATH}"
    probe = [sys.executable, "-c", "import squall.worker.process.lifecycle"]
    cmd = command(Sandbox(cwd="/", identity=identity), probe)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    if os.environ.get("PYTHONPATH"):  # where Squall may come from: the sandbox's users pass it on too
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{TOOL} could not be run: {e}"
    if proc.returncode != 0:
        return f"{TOOL} failed here: {(proc.stderr or proc.stdout).strip()[-300:]}"
    return None
