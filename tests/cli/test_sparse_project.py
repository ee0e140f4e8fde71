"""How ``squall sparse`` reads a streamparse project (squall.cli.sparse_project): the topology
it picks, the conf it resolves in streamparse's order, the requirements file, and what it says
of the settings that mean nothing here -- files only, no cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from squall.cli.main import main
from squall.cli.sparse_project import invocation, load_project, parse_options
from squall.cli.sparse_quickstart import FILES, quickstart
from squall.errors import SquallError


def make_project(tmp_path: Path, envs: dict | None = None) -> Path:
    root = quickstart("demo", tmp_path)
    if envs is not None:
        config = json.loads((root / "config.json").read_text())
        config["envs"] = envs
        (root / "config.json").write_text(json.dumps(config))
    return root


def test_quickstart_lays_out_streamparses_project(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["sparse", "quickstart", "wordcount"]) == 0
    root = tmp_path / "wordcount"
    for relative in ["config.json", "topologies/wordcount.py", "src/bolts/wordcount.py",
                     "src/spouts/words.py", "virtualenvs/wordcount.txt"]:
        assert (root / relative).is_file(), relative
    config = json.loads((root / "config.json").read_text())
    assert config["topology_specs"] == "topologies/" and config["virtualenv_specs"] == "virtualenvs/"
    assert "from streamparse import" in (root / "topologies/wordcount.py").read_text()
    assert "squall sparse run" in capsys.readouterr().out
    # a second time: the directory is there, nothing is overwritten
    with pytest.raises(SquallError, match="exists: a quickstart makes a new directory"):
        quickstart("wordcount", tmp_path)
    with pytest.raises(SquallError, match="letters, digits and '_'"):
        quickstart("word-count", tmp_path)


def test_the_only_topology_is_picked_and_a_missing_one_is_named(tmp_path: Path) -> None:
    project = load_project(make_project(tmp_path))
    inv = invocation(project, None, None, {})
    assert inv.name == "wordcount" and inv.file == project.root / "topologies" / "wordcount.py"
    assert inv.requirements == project.root / "virtualenvs" / "wordcount.txt"
    (project.root / "topologies" / "other.py").write_text("")
    with pytest.raises(SquallError, match=r"holds several topologies \(other, wordcount\): name one with -n"):
        invocation(project, None, None, {})
    with pytest.raises(SquallError, match=r"definition .*nope\.py \(topologies here: other, wordcount\)"):
        invocation(project, "nope", None, {})


def test_conf_is_resolved_in_streamparses_order(tmp_path: Path) -> None:
    envs = {"prod": {"options": {"topology.workers": 4, "topology.message.timeout.secs": 60}},
            "beta": {"options": {"topology.workers": 1}}}
    project = load_project(make_project(tmp_path, envs))
    with pytest.raises(SquallError, match=r"several environments \(beta, prod\): pick one with -e"):
        invocation(project, None, None, {})
    # the environment's options, under the command line's (-o values read as YAML)
    options = parse_options(["topology.workers=2", "topology.debug=true", "my.list=[1, 2]"])
    inv = invocation(project, None, "prod", options)
    assert inv.conf == {"topology.workers": 2, "topology.message.timeout.secs": 60,
                        "topology.debug": True, "my.list": [1, 2]}
    # sparse run: one worker, one acker unless acking is off
    assert invocation(project, None, "prod", {}, local=True).conf["topology.acker.executors"] == 1
    off = invocation(project, None, "prod", {"topology.acker.executors": 0}, local=True)
    assert off.conf["topology.acker.executors"] == 0 and off.conf["topology.workers"] == 1
    with pytest.raises(SquallError, match=r"no environment 'staging' in config\.json"):
        invocation(project, None, "staging", {})
    with pytest.raises(SquallError, match=r"-o expects key=value, got 'topology\.workers'"):
        parse_options(["topology.workers"])


def test_settings_with_no_meaning_here_are_named_not_ignored(tmp_path: Path) -> None:
    envs = {"prod": {"user": "storm", "nimbus": "nimbus.example.com:6627", "workers": ["w1", "w2"],
                     "virtualenv_root": "/data/virtualenvs", "ssh_password": "",
                     "log": {"path": "/var/log/storm", "level": "info"}}}
    inv = invocation(load_project(make_project(tmp_path, envs)), None, None, {})
    said = " ".join(inv.notes)
    for key in ("'user'", "'nimbus'", "'workers'", "'virtualenv_root'", "'log'"):
        assert key in said
    assert "ssh_password" not in said  # empty: nothing to say
    # the quickstart's own config.json (empty SSH settings, default log sizes) says nothing
    fresh = invocation(load_project(make_project(tmp_path / "fresh")), None, None, {})
    assert fresh.notes == []


def test_requirements_default_to_virtualenvs_name_and_r_overrides(tmp_path: Path) -> None:
    project = load_project(make_project(tmp_path))
    other = tmp_path / "reqs.txt"
    other.write_text("requests\n")
    assert invocation(project, None, None, {}, requirements=[str(other)]).requirements == other
    with pytest.raises(SquallError, match="no requirements file"):
        invocation(project, None, None, {}, requirements=[str(tmp_path / "missing.txt")])
    (project.root / "virtualenvs" / "wordcount.txt").unlink()
    inv = invocation(project, None, None, {})
    assert inv.requirements is None and "runs with Squall's own packages" in inv.notes[0]


def test_outside_a_project_and_commands_with_no_counterpart_say_so(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["sparse", "run"]) == 1
    assert "runs in a streamparse project's directory (one with config.json" in capsys.readouterr().err
    assert main(["sparse", "jar"]) == 1
    assert "`sparse jar` has no counterpart on Squall: there is no jar" in capsys.readouterr().err
    assert set(FILES) >= {"config.json", "README.md"}


def test_the_committed_example_is_what_quickstart_writes(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "streamparse" / "wordcount"
    fresh = quickstart("wordcount", tmp_path)
    for relative in FILES:
        assert (example / relative).read_text() == (fresh / relative).read_text(), relative
