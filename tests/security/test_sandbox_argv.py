"""The sandbox's command line (squall.runtime.sandbox.argv), a pure function of a
made-up file system: what is shown, what is hidden, and as whom it runs."""

from __future__ import annotations

from squall.runtime.sandbox import Identity, Sandbox, argv, outermost, pick_uid

PRIVATE = {"/root", "/srv/squall/local", "/tmp/pytest-of-root"}
RUNTIME = ["/root/.pyenv/versions/3.11.7", "/opt/venv"]


def build(box: Sandbox) -> list[str]:
    return argv(box, ["python", "-m", "squall.worker"], private=lambda p: p in PRIVATE, runtime=RUNTIME,
                exists=lambda p: p in {"/bin", "/lib", "/lib64", "/usr", "/etc"},
                readlink=lambda p: "usr" + p, isdir=lambda p: p != "/bin")


def pairs(args: list[str], flag: str) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args) if a == flag]


def test_a_worker_sees_the_host_but_a_private_folder_only_down_to_what_it_needs() -> None:
    slot = "/srv/squall/local/workers/6700"
    args = build(Sandbox(cwd=slot, identity=Identity(61184, 61184), write=[slot],
                         read=["/srv/squall/local/code/t1"], network=True, strict=False,
                         die_with_parent=False))
    assert args[:2] == ["bwrap", "--unshare-pid"] and "--as-pid-1" in args
    assert "--unshare-net" not in args and "--die-with-parent" not in args
    assert pairs(args, "--bind")[0] == "/"  # the host, under Unix permissions
    # the private folders on the way are empty tmpfs, with only the needed paths bound in
    assert pairs(args, "--tmpfs") == ["/root", "/srv/squall/local", "/tmp"]
    assert slot in pairs(args, "--bind") and "/srv/squall/local/code/t1" in pairs(args, "--ro-bind")
    assert "/root/.pyenv/versions/3.11.7" in pairs(args, "--ro-bind")
    assert args.index("--tmpfs") < args.index(slot)
    # and it becomes the topology's user, with no way back to root
    tail = args[args.index("setpriv"):]
    assert tail[:6] == ["setpriv", "--reuid=61184", "--regid=61184", "--clear-groups", "--no-new-privs",
                        "--inh-caps=-all"]
    assert tail[-3:] == ["python", "-m", "squall.worker"]


def test_verification_is_strict_no_network_and_dies_with_nimbus() -> None:
    code = "/tmp/squall-verify-x/code"
    args = build(Sandbox(cwd=code, identity=Identity(65400, 65400), write=[code]))
    assert "--unshare-net" in args and "--die-with-parent" in args
    assert "/" not in pairs(args, "--bind")  # nothing of the host but what is listed
    assert pairs(args, "--symlink") == ["usr/bin"]
    assert {"/usr", "/etc", "/lib", "/lib64", "/opt/venv"} <= set(pairs(args, "--ro-bind"))
    assert pairs(args, "--bind") == [code]
    assert "/tmp/squall-verify-x" in pairs(args, "--dir")


def test_not_root_keeps_the_callers_user_in_a_namespace_and_hides_etc_but_the_basics() -> None:
    args = build(Sandbox(cwd="/work", write=["/work"]))
    assert "--unshare-user" in args and "setpriv" not in args
    assert "/etc" not in pairs(args, "--ro-bind")


def test_a_read_only_path_above_a_written_one_is_not_shown_whole() -> None:
    # (a daemon started in its local directory has it on sys.path: showing it read-only
    # would open every private folder below it)
    slot = "/srv/squall/local/workers/6700"
    args = argv(Sandbox(cwd=slot, identity=Identity(1, 1), write=[slot], strict=False), ["x"],
                private=lambda p: p in PRIVATE, runtime=["/srv/squall/local", "/usr"])
    assert "/srv/squall/local" not in pairs(args, "--ro-bind")


def test_outermost_and_pick_uid() -> None:
    assert outermost(["/a/b", "/a", "/c", "/a/b/c", "/ab"]) == ["/a", "/ab", "/c"]
    assert pick_uid([10, 11, 13], 10, 14) == 12
    assert pick_uid([10, 11], 10, 11) is None
