"""squall.runtime.sandbox: the bubblewrap command line for a made-up file system (pure),
then real sandboxes (real bwrap, as root and as the caller's own user) that try to read
what a daemon keeps: its keys, its command line and environment, its working directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from squall.runtime import sandbox
from squall.runtime.sandbox import Identity, Sandbox, argv, outermost, pick_uid

# A made-up host: a merged /usr (/bin a symlink, /lib a directory), Python under a private
# home (/home/ann is 0700), an application in /srv, no /lib32 or /opt.
DIRS = {"/lib", "/lib64", "/usr", "/etc", "/etc/ssl", "/home", "/home/ann", "/home/ann/.pyenv",
        "/home/ann/.pyenv/versions", "/home/ann/.pyenv/versions/3.11", "/srv", "/srv/app", "/srv/keys",
        "/tmp", "/var", "/var/lib", "/var/lib/squall", "/var/lib/squall/slot-1"}
LINKS = {"/bin": "usr/bin", "/sbin": "usr/sbin"}
FILES = {"/etc/passwd", "/etc/hosts", "/etc/localtime", "/etc/ld.so.cache"}
PRIVATE = {"/home/ann", "/var/lib/squall"}
RUNTIME = ["/home/ann/.pyenv/versions/3.11", "/srv/app"]
UID = Identity(65400, 65400)
ARITY = {"--ro-bind": 2, "--bind": 2, "--symlink": 2, "--perms": 1, "--tmpfs": 1, "--dir": 1, "--proc": 1,
         "--dev": 1, "--chdir": 1, "--cap-add": 1}


def build(box: Sandbox, command: list[str] | None = None) -> list[str]:
    return argv(box, command or ["python3", "-c", "pass"], private=PRIVATE.__contains__, runtime=RUNTIME,
                exists=lambda p: p in DIRS | FILES | set(LINKS), readlink=LINKS.__getitem__,
                isdir=DIRS.__contains__)


def ops(args: list[str]) -> tuple[list[tuple[str, ...]], list[str]]:
    """bwrap's options as (flag, its arguments...) in order, and what follows ``--``."""
    out: list[tuple[str, ...]] = []
    i = 1
    while args[i] != "--":
        n = ARITY.get(args[i], 0)
        out.append(tuple(args[i:i + n + 1]))
        i += n + 1
    return out, args[i + 1:]


def mounts(args: list[str]) -> list[tuple[str, ...]]:
    """The file system options, each with the --perms before it folded in."""
    out: list[tuple[str, ...]] = []
    perms = None
    for op in ops(args)[0]:
        if op[0] == "--perms":
            perms = op[1]
        elif op[0] in ("--ro-bind", "--bind", "--symlink", "--tmpfs", "--dir", "--proc", "--dev"):
            out.append((*op, *([f"mode={perms}"] if perms and op[0] in ("--tmpfs", "--dir") else [])))
            perms = None
    return out


def visible(args: list[str]) -> set[str]:
    """Paths the sandbox gets from the host (bound), not made empty."""
    return {op[2] for op in mounts(args) if op[0] in ("--ro-bind", "--bind")}


# -- the command line, pure ---------------------------------------------------------------


def test_strict_as_another_user_sees_the_system_python_and_its_own_directory() -> None:
    args = build(Sandbox(cwd="/tmp/v/code", identity=UID, write=["/tmp/v/code"]))
    flags, command = ops(args)
    names = [op[0] for op in flags]
    # Namespaces of its own, no network, dies with nimbus; the user switch is setpriv's.
    for flag in ("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--new-session",
                 "--die-with-parent"):
        assert flag in names
    assert "--unshare-user" not in names  # root switches users for real
    assert [op for op in flags if op[0] == "--cap-add"] == [("--cap-add", "CAP_SETUID"),
                                                           ("--cap-add", "CAP_SETGID")]
    assert command[:7] == ["setpriv", "--reuid=65400", "--regid=65400", "--clear-groups", "--no-new-privs",
                           "--inh-caps=-all", "--"]
    assert command[7:] == ["python3", "-c", "pass"]
    assert ("--chdir", "/tmp/v/code") in flags
    # The host's root is not there: only the system, Python and the package.
    got = mounts(args)
    assert ("--bind", "/", "/") not in got
    assert ("--symlink", "usr/bin", "/bin") in got and ("--ro-bind", "/lib", "/lib") in got
    assert ("--ro-bind", "/etc", "/etc") in got  # another user: Unix permissions keep the rest
    assert visible(args) == {"/lib", "/lib64", "/usr", "/etc", *RUNTIME, "/tmp/v/code"}
    assert ("--bind", "/tmp/v/code", "/tmp/v/code") in got  # the one writable place
    assert all(op[0] != "--bind" or op[1] == "/tmp/v/code" for op in got)
    # The private home is an empty directory holding just the interpreter's folder.
    assert ("--dir", "/home/ann", "mode=0755") in got
    assert not any(op[0] in ("--ro-bind", "--bind") and op[1] in ("/home/ann", "/srv", "/srv/keys")
                   for op in got)


def test_strict_as_the_callers_user_gets_a_user_namespace_and_a_few_files_of_etc() -> None:
    args = build(Sandbox(cwd="/srv/work", identity=None, write=["/srv/work"]))
    flags, command = ops(args)
    assert ("--unshare-user",) in flags
    assert command == ["python3", "-c", "pass"]  # no setpriv, no capabilities
    assert not any(op[0] == "--cap-add" for op in flags)
    got = mounts(args)
    assert ("--ro-bind", "/etc", "/etc") not in got  # the caller's own secrets may be in /etc
    etc = {op[1] for op in got if op[0] == "--ro-bind" and op[1].startswith("/etc")}
    assert etc == {"/etc/ssl", "/etc/passwd", "/etc/hosts", "/etc/localtime", "/etc/ld.so.cache"}
    # /srv is an empty directory holding the application and the work directory, not the keys.
    assert ("--dir", "/srv", "mode=0755") in got
    assert {"/srv/app", "/srv/work"} <= visible(args) and "/srv/keys" not in visible(args)


def test_tmp_is_always_empty_and_a_directory_under_it_is_bound_after_it() -> None:
    for box in (Sandbox(cwd="/tmp/a/b", identity=UID, write=["/tmp/a/b"]),
                Sandbox(cwd="/tmp/a/b", identity=None, write=["/tmp/a/b"], strict=False)):
        got = mounts(build(box))
        tmpfs = got.index(("--tmpfs", "/tmp", "mode=1777"))
        parent = got.index(("--dir", "/tmp/a", "mode=0755"))
        bound = got.index(("--bind", "/tmp/a/b", "/tmp/a/b"))
        assert tmpfs < parent < bound


def test_host_mode_binds_the_root_and_empties_private_directories_on_the_way() -> None:
    slot = "/var/lib/squall/slot-1"
    args = build(Sandbox(cwd=slot, identity=UID, write=[slot], strict=False, network=True,
                         die_with_parent=False))
    flags, _ = ops(args)
    names = [op[0] for op in flags]
    assert "--unshare-net" not in names and "--die-with-parent" not in names
    got = mounts(args)
    assert got[0] == ("--bind", "/", "/")
    # Both private directories above what the worker needs are replaced by empty ones
    # (after the root's bind), holding only that.
    assert ("--tmpfs", "/home/ann", "mode=0755") in got and ("--tmpfs", "/var/lib/squall", "mode=0755") in got
    assert ("--ro-bind", "/home/ann/.pyenv/versions/3.11", "/home/ann/.pyenv/versions/3.11") in got
    assert ("--bind", slot, slot) in got
    assert got.index(("--tmpfs", "/var/lib/squall", "mode=0755")) < got.index(("--bind", slot, slot))
    # Not private: left as the host has it, under Unix permissions.
    assert not any(op[0] == "--tmpfs" and op[1] in ("/srv", "/home", "/var") for op in got)


def test_host_mode_as_the_callers_user_hides_nothing_but_tmp() -> None:
    got = mounts(build(Sandbox(cwd="/srv/app", identity=None, strict=False)))
    assert got[0] == ("--bind", "/", "/")
    assert [op for op in got if op[0] == "--tmpfs"] == [("--tmpfs", "/tmp", "mode=1777")]


def test_what_is_below_a_written_directory_is_not_bound_again() -> None:
    args = build(Sandbox(cwd="/srv/app", identity=UID, write=["/srv"], read=["/srv/app/conf"]))
    assert ("--bind", "/srv", "/srv") in mounts(args)
    assert "/srv/app" not in visible(args) and "/srv/app/conf" not in visible(args)


def test_outermost_and_pick_uid() -> None:
    assert outermost(["/a/b", "/a", "/ab", "/a/b/c", "/a"]) == ["/a", "/ab"]
    assert pick_uid([], 10, 12) == 10
    assert pick_uid([10, 11], 10, 12) == 12
    assert pick_uid([10, 11, 12], 10, 12) is None


def test_the_runtime_paths_leave_out_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          ) -> None:
    # Given a daemon started with `python -m` in the directory of its keys (a dev cluster's
    # root): Python puts that directory first on the import path.
    keys = tmp_path / "cluster"
    keys.mkdir()
    monkeypatch.chdir(keys)
    monkeypatch.syspath_prepend(str(keys))
    # Then the sandbox's runtime is Python's and Squall's, not that directory.
    paths = sandbox.runtime_paths()
    assert not any(str(keys).startswith(p) for p in paths), paths
    assert any(Path(sys.base_prefix).resolve().as_posix().startswith(p) for p in paths)


# -- real sandboxes ------------------------------------------------------------------------

SPY = r"""
import json, os, sys
host_pid, paths = int(sys.argv[1]), sys.argv[2:]
found = {}
for path in [*paths, f"/proc/{host_pid}/cmdline", f"/proc/{host_pid}/environ"]:
    try:
        with open(path, "rb") as f:
            found[path] = f.read().decode("utf-8", "replace")
    except OSError as e:
        found[path] = type(e).__name__
found["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
found["uid"] = os.getuid()
try:
    os.listdir(os.path.dirname(paths[0]))
    found["listed"] = True
except OSError:
    found["listed"] = False
print(json.dumps(found))
"""


def require_bwrap(identity: Identity | None) -> None:
    why = sandbox.unavailable(identity)
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"no sandbox here: {why} (CI installs bubblewrap: ops/bootstrap.sh)")
        pytest.skip(f"no sandbox here: {why}")


@pytest.mark.parametrize("identity", [UID, None], ids=["another-user", "own-user"])
def test_a_sandbox_reads_none_of_the_daemons_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     identity: Identity | None) -> None:
    if identity is not None and not sandbox.can_switch_users():
        pytest.skip("switching users needs root")
    require_bwrap(identity)
    # Given a daemon's directory outside /tmp (a sandbox's /tmp is its own anyway) with its
    # keyring and config, as its working directory and first on its import path, and a
    # secret in its environment
    root = Path(os.path.realpath("/var/tmp")) / f"squall-sandbox-{os.getpid()}-{tmp_path.name}"
    root.mkdir(mode=0o700)
    try:
        keyring, conf = root / "keyring.json", root / "squall.yaml"
        keyring.write_text(json.dumps({"token": "sq_keyring-token-1234"}))
        conf.write_text("squall.keyring.path: " + str(keyring) + "\nredis.password: conf-pw-5678\n")
        os.chmod(keyring, 0o600)
        monkeypatch.chdir(root)
        monkeypatch.syspath_prepend(str(root))
        monkeypatch.setenv("SQUALL_TEST_SECRET", "env-secret-9012")
        work = tmp_path / "work"
        work.mkdir()
        if identity is not None:
            os.chown(work, identity.uid, identity.gid)
        # When a program in a strict sandbox tries to read them
        box = Sandbox(cwd=str(work), identity=identity, write=[str(work)])
        env = {"PATH": os.environ["PATH"], **({"PYTHONPATH": os.environ["PYTHONPATH"]}
                                               if "PYTHONPATH" in os.environ else {})}
        spy = [sys.executable, "-c", SPY, str(os.getpid()), str(keyring), str(conf)]
        proc = subprocess.run(argv(box, spy), capture_output=True, text=True, timeout=60, check=False,
                              env=env)
    finally:
        for p in root.iterdir():
            p.unlink()
        root.rmdir()
    # Then every read failed, and nothing of the secrets came out
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    for path in (str(keyring), str(conf), f"/proc/{os.getpid()}/cmdline", f"/proc/{os.getpid()}/environ"):
        assert found[path] in ("FileNotFoundError", "PermissionError"), (path, found[path])
    assert not found["listed"]  # the daemon's directory is not there at all
    assert set(found["pids"]) <= {1, 2}, found["pids"]  # bwrap's init and the program: nothing of the host
    for secret in ("sq_keyring-token-1234", "conf-pw-5678", "env-secret-9012"):
        assert secret not in proc.stdout + proc.stderr
    assert found["uid"] == (identity.uid if identity is not None else os.getuid())
