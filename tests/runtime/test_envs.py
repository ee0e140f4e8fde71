"""A topology's requirements, normalised and hashed, and a node's cache decisions (squall.runtime.envs)."""

from __future__ import annotations

import pytest

from squall.errors import SquallError
from squall.runtime.envs import EnvCache, Requirements, from_record, parse_requirements, pins, read


def test_comments_blank_lines_and_continuations_do_not_count() -> None:
    text = "# deps\n\nredis==5.0  # the store\nrequests \\\n  >=2.0\n"
    parsed = parse_requirements(text, "/p")
    assert parsed.lines == ("redis==5.0", "requests >=2.0")
    assert parsed.count == 2
    edited = parse_requirements("redis==5.0\n# another comment\nrequests \\\n  >=2.0", "/p")
    assert edited.key("cp311", "0.1") == parsed.key("cp311", "0.1")


def test_the_hash_follows_the_requirements_python_and_squall() -> None:
    one = Requirements(("redis==5.0",))
    assert one.key("cpython-311-3.11.7", "0.1") == one.key("cpython-311-3.11.7", "0.1")
    other = Requirements(("redis==5.1",))
    keys = {one.key("cpython-311-3.11.7", "0.1"), one.key("cpython-312-3.12.1", "0.1"),
            one.key("cpython-311-3.11.7", "0.2"), other.key("cpython-311-3.11.7", "0.1")}
    assert len(keys) == 4


def test_streamparse_and_pystorm_are_dropped_with_a_note() -> None:
    parsed = parse_requirements("streamparse>=4.0\nPyStorm==3.1\nsimplejson\n", "/p", "virtualenvs/wc.txt")
    assert parsed.lines == ("simplejson",)
    assert len(parsed.notes) == 2
    assert all("provided by Squall" in note for note in parsed.notes)
    assert parsed.notes[0].startswith("streamparse>=4.0")


def test_relative_paths_become_absolute_against_the_file() -> None:
    parsed = parse_requirements("--no-index\n--find-links wheels\n-f/abs\n./dist/pkg-1.0-py3-none-any.whl\n"
                                "-e ../lib\nhttps://example.org/x-1.0.tar.gz\n", "/project/virtualenvs")
    assert parsed.lines == ("--no-index", "--find-links /project/virtualenvs/wheels", "-f /abs",
                            "/project/virtualenvs/dist/pkg-1.0-py3-none-any.whl",
                            "-e /project/lib", "https://example.org/x-1.0.tar.gz")
    assert parsed.count == 3 - 1 + 1  # the wheel, -e, the URL
    with pytest.raises(SquallError, match="relative path"):
        parse_requirements("--find-links wheels", None)


def test_bad_lines_are_named() -> None:
    with pytest.raises(SquallError, match=r"req.txt, line 2: .*not a requirement"):
        parse_requirements("ok\n!!bad\n", "/p", "req.txt")
    with pytest.raises(SquallError, match="constraints"):
        parse_requirements("-c other.txt", "/p")
    with pytest.raises(SquallError, match="--target"):
        parse_requirements("--target /x", "/p")


def test_nested_files_are_taken_in_and_may_not_loop() -> None:
    files = {"/p/base.txt": "six\n-r more.txt\n", "/p/more.txt": "streamparse\nattrs\n"}
    parsed = parse_requirements("-r base.txt\nredis", "/p", "main.txt", files.__getitem__)
    assert parsed.lines == ("six", "attrs", "redis")
    assert parsed.notes
    with pytest.raises(SquallError, match="includes itself"):
        parse_requirements("-r a.txt", "/p", "main.txt", {"/p/a.txt": "-r a.txt"}.__getitem__)
    with pytest.raises(SquallError, match="cannot be read"):
        parse_requirements("-r a.txt", "/p")


def test_pyproject_dependencies() -> None:
    text = '[project]\nname = "x"\ndependencies = ["redis>=5", "streamparse"]\n'
    parsed = read("/p/pyproject.toml", text, "/p")
    assert parsed.lines == ("redis>=5",)
    with pytest.raises(SquallError, match="dynamic"):
        read("pyproject.toml", '[project]\nname = "x"\ndynamic = ["dependencies"]\n', "/p")
    with pytest.raises(SquallError, match=r"no \[project\]"):
        read("pyproject.toml", "[tool.x]\n", "/p")


def test_a_record_is_checked_again() -> None:
    assert from_record(None) is None
    assert from_record({"source": "r.txt", "lines": ["six"]}) == Requirements(("six",), "r.txt")
    with pytest.raises(SquallError, match="relative path"):
        from_record({"lines": ["--find-links wheels"]})
    with pytest.raises(SquallError, match="must be"):
        from_record({"lines": "six"})


def test_pins_follow_dependencies() -> None:
    installed = {"a": ("1.0", ["b>=2", "c; extra == 'x'"]), "b": ("2.1", []), "c": ("3", []), "d": ("4", [])}
    assert pins(["A"], installed) == ["a==1.0", "b==2.1", "c==3"]


def test_unused_environments_go_after_the_grace_period() -> None:
    cache = EnvCache(grace_secs=60)
    assert cache.sweep(["e1", "e2"], {"e1": {"topo-a"}, "e2": set()}, now=100) == []
    assert cache.sweep(["e1", "e2"], {"e1": {"topo-a"}}, now=159) == []
    assert cache.sweep(["e1", "e2"], {"e1": {"topo-a"}}, now=160) == ["e2"]
    # used again within its grace: the clock starts over when it is unused again
    assert cache.sweep(["e1"], {}, now=200) == []
    assert cache.sweep(["e1"], {"e1": ["topo-b"]}, now=230) == []
    assert cache.sweep(["e1"], {}, now=250) == []
    assert cache.sweep(["e1"], {}, now=309) == []
    assert cache.sweep(["e1"], {}, now=310) == ["e1"]
    assert cache.unused_since == {}


def test_failed_builds_back_off() -> None:
    cache = EnvCache(grace_secs=60, retry_secs=5, max_retry_secs=12)
    assert cache.may_build("e", 0)
    assert cache.build_failed("e", 0) == 5
    assert not cache.may_build("e", 4.9)
    assert cache.may_build("e", 5)
    assert cache.build_failed("e", 5) == 10
    assert cache.build_failed("e", 15) == 12
    cache.built("e")
    assert cache.may_build("e", 15)
