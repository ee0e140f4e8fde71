"""A cluster's environment builds as user code (squall.runtime.buildbox): the sandbox and
environment pip gets (pure), the tree handed back, what the caller is told; then real
builds in a real sandbox: a hostile build backend, a build past its timeout, and a root
daemon without a sandbox, which builds nothing."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from squall.errors import SquallError
from squall.runtime import buildbox, sandbox
from squall.runtime.buildbox import Builder, build_box, environment, error_lines, own_tree, shown_paths
from squall.runtime.envbuild import EnvBuildError, EnvRefused, EnvStore
from squall.runtime.envs import parse_requirements
from squall.runtime.sandbox import Identity
from squall.testing import poll_for
from tests.helpers import make_sdist, make_wheel, processes_marked

ENV = "/var/lib/squall/envs/0123abcd"
BUILDER = Identity(65464, 65464)
RUNTIME = ["/usr/lib/python3.11", "/opt/squall/venv"]


def argv_of(box: sandbox.Sandbox) -> list[str]:
    """bwrap's command line for a made-up host: /var/lib/squall private, merged /usr."""
    dirs = {"/usr", "/etc", "/lib", "/var", "/var/lib", "/var/lib/squall", "/srv", "/srv/wheels"}
    return sandbox.argv(box, ["python", "-m", "pip"], private=lambda p: p == "/var/lib/squall",
                        runtime=RUNTIME, exists=lambda p: p in dirs or p == "/bin",
                        readlink=lambda p: "usr/bin", isdir=dirs.__contains__)


def binds(args: list[str]) -> set[tuple[str, str, str]]:
    return {(args[i], args[i + 1], args[i + 2]) for i, a in enumerate(args) if a in ("--bind", "--ro-bind")}


# -- what pip runs in, pure -----------------------------------------------------------------


def test_as_root_pip_runs_as_a_builder_uid_seeing_its_env_and_the_named_paths_only() -> None:
    args = argv_of(build_box(ENV, BUILDER, ["/srv/wheels/a-1.0-py3-none-any.whl"]))
    # its own namespaces, the network kept (pip needs the index), the root an empty tmpfs
    assert {"--unshare-pid", "--unshare-ipc", "--new-session", "--die-with-parent"} <= set(args)
    assert "--unshare-net" not in args and "--unshare-user" not in args
    assert args[args.index("--tmpfs") - 2:args.index("--tmpfs") + 2] == ["--perms", "1777", "--tmpfs", "/tmp"]
    assert "/" not in [b[2] for b in binds(args)]  # strict: no host root, only what is bound below
    # writable: the environment being built, nothing else of storm.local.dir; read only: the
    # system's and Python's directories, and each named path (the folders on the way made, 0755)
    assert {b for b in binds(args) if b[0] == "--bind"} == {("--bind", ENV, ENV)}
    wheel = "/srv/wheels/a-1.0-py3-none-any.whl"
    assert ("--ro-bind", wheel, wheel) in binds(args)
    assert not any(b[2] in ("/var/lib/squall", "/var/lib/squall/envs", "/srv/wheels") for b in binds(args))
    made = [args[i + 1] for i, a in enumerate(args) if a == "--dir"]
    assert {"/var", "/var/lib", "/var/lib/squall", "/var/lib/squall/envs", "/srv", "/srv/wheels"} <= set(made)
    assert all(args[i - 1] == "0755" for i, a in enumerate(args) if a == "--dir")
    assert {("--ro-bind", p, p) for p in ("/usr", "/etc", *RUNTIME)} <= binds(args)
    # and it drops to the builder's uid for good before pip starts
    tail = args[args.index("setpriv"):]
    assert tail[:6] == ["setpriv", "--reuid=65464", "--regid=65464", "--clear-groups", "--no-new-privs",
                        "--inh-caps=-all"]
    assert tail[-3:] == ["python", "-m", "pip"]


def test_not_root_the_daemons_own_user_in_a_user_namespace_sees_pips_site_config() -> None:
    box = build_box(ENV, None, {}, exists=lambda p: p == "/etc/pip.conf")
    args = argv_of(box)
    assert "--unshare-user" in args and "setpriv" not in args and "--unshare-net" not in args
    assert ("--ro-bind", "/etc/pip.conf", "/etc/pip.conf") in binds(args)
    assert ("--ro-bind", "/etc", "/etc") not in binds(args)  # only the sandbox's few files of it


def test_a_build_gets_a_fixed_environment_never_the_daemons(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQUALL_KEYRING", "/root/.squall/keyring.json")
    monkeypatch.setenv("PIP_INDEX_URL", "https://user:secret@index.internal/simple")
    env = environment(ENV, BUILDER, {"HTTPS_PROXY": "http://proxy:3128", "HOME": "/root"})
    assert env == {"HTTPS_PROXY": "http://proxy:3128", "PATH": f"{ENV}/bin:/usr/local/bin:/usr/bin:/bin",
                   "HOME": f"{ENV}/.build/home", "TMPDIR": f"{ENV}/.build/tmp", "USER": "squall-65464",
                   "LOGNAME": "squall-65464", "LANG": "C.UTF-8", "PYTHONNOUSERSITE": "1",
                   "PIP_NO_CACHE_DIR": "1", "PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def test_named_paths_are_checked_again_on_disk(tmp_path: Path) -> None:
    wheels, keys = tmp_path / "wheels", tmp_path / "keys"
    wheels.mkdir()
    keys.mkdir()
    (wheels / "a-1.0-py3-none-any.whl").write_bytes(b"")
    (keys / "keyring.json").write_text("{}")
    (wheels / "b-1.0-py3-none-any.whl").symlink_to(keys / "keyring.json")
    (tmp_path / "via").symlink_to(wheels)  # the admin's directory named through a link
    a = str(wheels / "a-1.0-py3-none-any.whl")
    assert shown_paths((a,), (str(tmp_path / "via"),)) == [a]
    with pytest.raises(SquallError, match=r"leads to .*keyring\.json, which is not under"):
        shown_paths((str(wheels / "b-1.0-py3-none-any.whl"),), (str(wheels),))
    with pytest.raises(SquallError, match="reached through a link: name its real path"):
        shown_paths((str(tmp_path / "via" / "a-1.0-py3-none-any.whl"),), (str(tmp_path / "via"),))
    with pytest.raises(SquallError, match="does not exist"):
        shown_paths((str(wheels / "c-1.0-py3-none-any.whl"),), (str(wheels),))


def test_the_tree_is_handed_back_following_no_link(tmp_path: Path) -> None:
    outside = tmp_path / "daemon-file"
    outside.write_text("the daemon's")
    outside.chmod(0o600)
    tree = tmp_path / "env"
    (tree / "lib" / "private").mkdir(parents=True)
    (tree / "lib" / "private").chmod(0o700)
    (tree / "bin").mkdir()
    (tree / "bin" / "tool").write_text("#!/bin/sh\n")
    (tree / "bin" / "tool").chmod(0o4777)  # setuid, writable by all
    (tree / "lib" / "mod.py").write_text("x = 1\n")
    (tree / "lib" / "mod.py").chmod(0o600)
    (tree / "lib" / "link").symlink_to(outside)
    (tree / "lib" / "dir-link").symlink_to(tmp_path)
    os.link(outside, tree / "lib" / "hard")
    os.mkfifo(tree / "lib" / "fifo")
    uid, gid = (BUILDER.uid, BUILDER.gid) if os.geteuid() == 0 else (os.getuid(), os.getgid())
    size, removed = own_tree(str(tree), uid, gid)
    assert removed == 2 and not (tree / "lib" / "hard").exists() and not (tree / "lib" / "fifo").exists()
    assert size == len("#!/bin/sh\n") + len("x = 1\n")
    modes = {str(p.relative_to(tree)): stat.S_IMODE(p.lstat().st_mode) for p in tree.rglob("*")
             if not p.is_symlink()}
    assert modes == {"bin": 0o755, "bin/tool": 0o755, "lib": 0o755, "lib/private": 0o755, "lib/mod.py": 0o644}
    assert {p.lstat().st_uid for p in (tree, *tree.rglob("*"))} == {uid}
    # what the links lead to is untouched: neither re-owned, nor opened up, nor removed
    st = outside.stat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode), outside.read_text()) == (os.getuid(), 0o600, "the daemon's")
    assert tmp_path.stat().st_uid == os.getuid()


def test_the_caller_is_told_pips_own_error_lines_few_and_short() -> None:
    output = "\n".join([
        "Processing /w/a-1.0.tar.gz", "  ╰─> [2 lines of output]", "      ERROR: printed by the backend",
        *(f"ERROR: pip's line {i}" for i in range(7)), "ERROR: " + "x" * 1000,
        "ERROR: Could not fetch https://alice:hunter2@index.internal/simple/a/"])
    lines = error_lines(output)
    assert len(lines) == 5 and not any("backend" in line for line in lines)
    assert lines[-2] == "ERROR: " + "x" * 293 + "..."
    assert "hunter2" not in lines[-1] and "alice:*****@index.internal" in lines[-1]


# -- real builds --------------------------------------------------------------------------

sandboxed = pytest.mark.skipif(sandbox.unavailable(Identity(65464, 65464) if os.geteuid() == 0 else None)
                               is not None, reason="needs bubblewrap (and root, or user namespaces)")


def store(tmp_path: Path, timeout: float = 120, **conf: Any) -> EnvStore:
    return EnvStore(tmp_path / "envs", timeout, Builder(conf, "test", timeout))


@sandboxed
def test_a_hostile_backend_runs_sandboxed_and_its_words_stay_in_the_log(tmp_path: Path) -> None:
    keyring = tmp_path / "keyring.json"
    keyring.write_text('{"token": "hunter2"}')
    marker = tmp_path / "pwned"
    probe = (f"import json, os\nout = {{'uid': os.getuid(), 'env': sorted(os.environ)}}\n"
             f"for p in ({str(keyring)!r}, {str(tmp_path)!r}):\n"
             "    try:\n        seen = sorted(os.listdir(p)) if os.path.isdir(p) else open(p).read()\n"
             "        out[p] = 'GOT ' + str(seen)\n"
             "    except OSError as e:\n        out[p] = 'refused ' + type(e).__name__\n"
             f"try:\n    open({str(marker)!r}, 'w').write('x'); out['marker'] = 'written'\n"
             "except OSError as e:\n    out['marker'] = 'refused ' + type(e).__name__\n"
             "print('PROBE ' + json.dumps(out), flush=True)\n"
             "def get_requires_for_build_wheel(config_settings=None):\n    raise SystemExit(3)\n")
    sdists = tmp_path / "sdists"
    sdists.mkdir()
    sdist = make_sdist(sdists, "hostile", "1.0", probe)
    requirements = parse_requirements(f"--no-index\n{sdist}\n", None)
    # Refused by the default policy, before anything is made or run
    with pytest.raises(EnvRefused, match=r"lists 'sdist' in squall\.env\.build\.allow"):
        store(tmp_path).ensure(requirements)
    assert not (tmp_path / "envs").exists()
    # Allowed: it runs, in the sandbox
    allowed = store(tmp_path, **{"squall.env.build.allow": ["sdist"],
                                 "squall.env.build.paths": [str(sdists)]})
    with capture_logs() as logs, pytest.raises(EnvBuildError) as failed:
        allowed.ensure(requirements)
    said = str(failed.value)
    event = next(e for e in logs if e["event"] == "environment build output")
    assert f"test log reference {event['reference']}" in said and "ERROR: Failed to build" in said
    assert "PROBE" not in said
    report = json.loads(event["output"].split("PROBE ", 1)[1].splitlines()[0])
    assert report[str(keyring)] == "refused FileNotFoundError" and report["marker"].startswith("refused")
    assert report[str(tmp_path)] == "GOT ['envs', 'sdists']"  # the way to its own and to the sdist only
    assert not marker.exists() and not {"SQUALL_KEYRING", "PIP_INDEX_URL"} & set(report["env"])
    if os.geteuid() == 0:
        assert report["uid"] == event["uid"] == 65464
    assert (tmp_path / "envs").is_dir() and not any(p.name != ".locks" for p in (tmp_path / "envs").iterdir())


@sandboxed
def test_a_wheel_builds_and_is_the_daemons_read_only_to_others(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "sqdeptest", "1.0")
    envs = store(tmp_path, **{"squall.env.build.paths": [str(wheels)]})
    env = envs.ensure(parse_requirements(f"--no-index\n--find-links {wheels}\nsqdeptest==1.0\n", None))
    assert env.built and envs.size(env.key) > 0
    entries = [env.path, *env.path.rglob("*")]
    assert {p.lstat().st_uid for p in entries} == {os.getuid()}
    assert not [p for p in entries if not p.is_symlink() and p.lstat().st_mode & 0o022]
    assert not (env.path / ".build").exists()


@sandboxed
def test_a_build_past_its_timeout_is_killed_whole(tmp_path: Path) -> None:
    sdists = tmp_path / "sdists"
    sdists.mkdir()
    marker = f"squall-test-sleeper-{os.getpid()}-{tmp_path.name}"
    sleep = f"[sys.executable, '-c', 'import time; time.sleep(600)', {marker!r}]"
    sleeper = ("import os, sys, time\nif os.fork() == 0:\n"  # a process of its own too, past pip's
               f"    os.execv(sys.executable, {sleep})\n"
               "def get_requires_for_build_wheel(config_settings=None):\n    time.sleep(600)\n")
    sdist = make_sdist(sdists, "sleeper", "1.0", sleeper)
    envs = store(tmp_path, 3, **{"squall.env.build.allow": ["sdist"],
                                 "squall.env.build.paths": [str(sdists)]})
    with pytest.raises(EnvBuildError, match=r"did not finish in 3 s \(test log reference env-[0-9a-f]{8}\)"):
        envs.ensure(parse_requirements(f"--no-index\n{sdist}\n", None))
    # Killed with its pid namespace: gone within moments (a loaded machine reaps it late),
    # where a build left running would sleep its ten minutes.
    poll_for(lambda: not processes_marked(marker), timeout=15, message="the build's own process gone")
    assert envs.present() == []


def test_root_without_a_sandbox_builds_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(buildbox, "can_switch_users", lambda: True)
    monkeypatch.setattr(sandbox, "unavailable", lambda identity=None: "bwrap is not installed")
    envs = store(tmp_path)
    with pytest.raises(EnvBuildError, match="runs as root and cannot sandbox a build"):
        envs.ensure(parse_requirements("--no-index\nsqdeptest==1.0\n", None))
    assert envs.present() == []


@sandboxed
def test_what_a_build_plants_at_the_top_is_gone_before_the_tree_is_handed_back(tmp_path: Path) -> None:
    env = tmp_path / "envs" / "0123abcd"
    env.mkdir(parents=True)
    daemons = tmp_path / "daemon-file"
    daemons.write_text("the daemon's")
    daemons.chmod(0o600)
    plant = f"ln -s {daemons} .ready && mkdir .marks && echo planted > kept"
    outcome = Builder({}, "test", 60).run(env, ["/bin/sh", "-c", plant], ())
    assert outcome.returncode == 0 and outcome.errors == ()
    # a link named .ready would have had the daemon write its mark through it
    assert sorted(p.name for p in env.iterdir()) == ["kept"]
    st = daemons.stat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode), daemons.read_text()) == (os.getuid(), 0o600, "the daemon's")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to plant a file as another uid")
def test_a_ready_mark_of_another_uid_does_not_count(tmp_path: Path) -> None:
    envs = EnvStore(tmp_path / "envs")
    (envs.path("k")).mkdir(parents=True)
    (envs.path("k") / ".ready").write_text("{}")
    assert envs.ready("k")
    os.chown(envs.path("k") / ".ready", BUILDER.uid, BUILDER.gid)  # as a build would have left it
    assert not envs.ready("k")
