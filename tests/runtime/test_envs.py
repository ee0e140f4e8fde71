"""A topology's requirements, normalised and hashed, and a node's cache decisions (squall.runtime.envs)."""

from __future__ import annotations

import pytest

from squall.errors import ConfigError, SquallError
from squall.runtime.envs import (
    BUILD_KINDS,
    BuildPolicy,
    EnvCache,
    Requirements,
    from_record,
    needs,
    parse_requirements,
    pins,
    read,
)


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


# -- what a cluster builds (squall.env.build.allow / .paths) --------------------------------


@pytest.mark.parametrize(("line", "kinds", "paths"), [
    ("redis==5.0", set(), []),
    ("redis[hiredis]>=5 ; python_version >= '3.9'", set(), []),
    ("a==1 --hash=sha256:00", set(), []),
    ("--no-index", set(), []),
    ("--only-binary :all:", set(), []),
    ("--prefer-binary", set(), []),
    ("/w/a-1.0-py3-none-any.whl", set(), ["/w/a-1.0-py3-none-any.whl"]),
    ("/w/a-1.0-py3-none-any.whl; python_version > '3'", set(), ["/w/a-1.0-py3-none-any.whl"]),
    ("/w/../etc/a-1.0-py3-none-any.whl", set(), ["/etc/a-1.0-py3-none-any.whl"]),
    ("/w/a-1.0.tar.gz", {"sdist"}, ["/w/a-1.0.tar.gz"]),
    ("/w/src/a", {"sdist"}, ["/w/src/a"]),
    ("a @ file:///w/a-1.0.tar.gz", {"sdist"}, ["/w/a-1.0.tar.gz"]),
    ("file://localhost/w/a-1.0-py3-none-any.whl", set(), ["/w/a-1.0-py3-none-any.whl"]),
    ("--find-links /w", set(), ["/w"]),
    ("--find-links file:///w%20x/", set(), ["/w x"]),
    ("--find-links https://example.org/links/", {"index"}, []),
    ("-i https://example.org/simple", {"index"}, []),
    ("--extra-index-url https://example.org/simple", {"index"}, []),
    ("--trusted-host example.org", {"index"}, []),
    ("https://example.org/a-1.0-py3-none-any.whl", {"url"}, []),
    ("a @ https://example.org/a-1.0-py3-none-any.whl", {"url"}, []),
    ("https://example.org/a-1.0.tar.gz#sha256=00", {"url", "sdist"}, []),
    ("git+https://example.org/a.git@v1#egg=a", {"vcs"}, []),
    ("a @ git+ssh://git@example.org/a.git", {"vcs"}, []),
    ("-e /w/src/a", {"editable"}, ["/w/src/a"]),
    ("-e git+https://example.org/a.git#egg=a", {"editable", "vcs"}, []),
    ("--no-binary :all:", {"sdist"}, []),
])
def test_each_line_says_what_building_it_needs(line: str, kinds: set[str], paths: list[str]) -> None:
    assert needs(line) == (kinds, paths)


def test_by_default_only_wheels_from_the_index_are_built() -> None:
    policy = BuildPolicy.from_conf({})
    assert policy.pip_options() == ["--only-binary=:all:"]
    assert policy.check(Requirements(("--no-index", "redis==5.0", "six"))) == ()
    for line, kind in (("/w/a-1.0.tar.gz", "sdist"), ("git+https://h/a.git#egg=a", "vcs"),
                       ("https://h/a-1.0-py3-none-any.whl", "url"), ("-i https://h/simple", "index"),
                       ("-e git+https://h/a.git#egg=a", "editable")):
        with pytest.raises(SquallError) as refused:
            policy.check(Requirements(("six", line), "reqs.txt"))
        # the line, where it is, what it is and the key (and kind) that would allow it
        said = str(refused.value)
        assert f"reqs.txt, requirement 2: {line!r}" in said, said
        assert f"lists {kind!r} in squall.env.build.allow" in said, said


def test_paths_must_lie_under_the_admins_directories() -> None:
    policy = BuildPolicy.from_conf({"squall.env.build.paths": ["/srv/wheels/"],
                                    "squall.env.build.allow": ["sdist"]})
    assert policy.pip_options() == []  # sdists allowed: pip may build them
    named = policy.check(Requirements(("--find-links /srv/wheels", "/srv/wheels/a-1.0-py3-none-any.whl",
                                       "/srv/wheels/b-1.0.tar.gz", "/srv/wheels/a-1.0-py3-none-any.whl")))
    assert named == ("/srv/wheels", "/srv/wheels/a-1.0-py3-none-any.whl", "/srv/wheels/b-1.0.tar.gz")
    for line in ("/srv/wheels-old/a-1.0-py3-none-any.whl", "/srv/wheels/../keys/a-1.0-py3-none-any.whl",
                 "--find-links /srv", "a @ file:///etc/a-1.0.tar.gz"):
        with pytest.raises(SquallError, match=r"not under a directory the cluster's squall\.env\.build"):
            policy.check(Requirements((line,)))
    with pytest.raises(SquallError, match="not under"):  # no directory listed: no path at all
        BuildPolicy.from_conf({}).check(Requirements(("/srv/wheels/a-1.0-py3-none-any.whl",)))


def test_the_policy_conf_is_checked() -> None:
    with pytest.raises(ConfigError, match=r"squall\.env\.build\.allow"):
        BuildPolicy.from_conf({"squall.env.build.allow": ["wheels"]})
    with pytest.raises(ConfigError, match=r"squall\.env\.build\.paths"):
        BuildPolicy.from_conf({"squall.env.build.paths": ["relative/dir"]})
    assert BuildPolicy.from_conf({"squall.env.build.allow": list(BUILD_KINDS)}).allow == set(BUILD_KINDS)
