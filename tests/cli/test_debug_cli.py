"""`squall debug`'s arguments, refused before any request (against a real cluster:
tests/cluster/test_log_levels.py and tests/security/test_hostile_api.py)."""

from __future__ import annotations

import pytest

from squall.cli.main import main


@pytest.mark.parametrize("pct", ["nan", "101", "-5", "ten", "inf"])
def test_a_percentage_not_from_0_to_100_is_refused(pct: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["debug", "wordcount", "--enable", "--pct", pct])
    assert stop.value.code == 2
    assert f"a number from 0 to 100, got {pct!r}" in capsys.readouterr().err


def test_pct_goes_with_enable(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["debug", "wordcount", "--disable", "--pct", "5"]) == 1
    assert "--pct goes with --enable" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["debug", "wordcount", "--enable", "--disable"])
