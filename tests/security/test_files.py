"""Files written whole and private where a less trusted process may write too."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from squall.security.files import write_private


def test_a_link_planted_at_the_name_or_its_temporary_name_is_never_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("the supervisor's own")
    target = tmp_path / ".passwd"
    target.symlink_to(victim)
    (tmp_path / f"{target.name}.tmp").symlink_to(victim)
    write_private(target, "root:x:0:0::/root:/bin/sh\n", mode=0o640)
    assert victim.read_text() == "the supervisor's own"
    assert not target.is_symlink() and target.read_text() == "root:x:0:0::/root:/bin/sh\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_private_by_default_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        write_private(tmp_path / "secret", "s")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "secret").stat().st_mode) == 0o600
