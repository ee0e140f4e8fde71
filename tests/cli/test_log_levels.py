"""``squall set_log_level``'s command line, as Storm's: ``-l NAME=LEVEL[:SECS]``, ``-r NAME``,
the topology before or after them, and a bad setting refused naming it."""

from __future__ import annotations

import pytest

from squall.cli.log_levels import describe
from squall.cli.main import build_parser


@pytest.mark.parametrize("command", ["set_log_level", "set-log-level"])
def test_storms_spelling_in_either_order(command: str) -> None:
    args = build_parser().parse_args([command, "-l", "ROOT=debug:30", "wc", "-l", "com.x=WARN",
                                      "-r", "split"])
    assert args.name == "wc"
    assert args.set == [("ROOT", "DEBUG", 30), ("com.x", "WARN", 0)]
    assert args.reset == ["split"]
    args = build_parser().parse_args([command, "wc", "-l", "root=INFO:0"])
    assert args.set == [("ROOT", "INFO", 0)] and args.reset == []


@pytest.mark.parametrize(("setting", "says"), [
    ("ROOT=LOUD",
     "'ROOT=LOUD': unknown log level 'LOUD' (one of ALL, TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF)"),
    ("ROOT=DEBUG:soon", "'ROOT=DEBUG:soon': the timeout 'soon' is not a whole number of seconds"),
    ("ROOT=DEBUG:-5", "'ROOT=DEBUG:-5': the timeout '-5' is not a whole number of seconds"),
    ("ROOT", "'ROOT': expected NAME=LEVEL[:SECONDS]"),
    ("=DEBUG", "'=DEBUG': a logger name must be a non-empty string"),
])
def test_a_bad_setting_is_refused_naming_it(setting: str, says: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["set_log_level", "-l", setting, "wc"])
    assert exited.value.code == 2
    assert f"argument -l: {says}" in capsys.readouterr().err


def test_what_is_set_is_said_with_until_when() -> None:
    answer = {"namedLoggerLevels": {
        "split": {"target_level": "INFO", "reset_level": None, "timeout": 0, "timeout_epoch": 0},
        "ROOT": {"target_level": "DEBUG", "reset_level": None, "timeout": 30,
                 "timeout_epoch": 1_767_355_230_000}}}
    assert describe(answer) == ["  ROOT: DEBUG until 2026-01-02 12:00:30 UTC (30 s)",
                                "  split: INFO until reset (-r split)"]
