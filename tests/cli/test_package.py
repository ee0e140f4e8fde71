"""Code packages: a manifest zipped (what goes in: tests/runtime/test_manifest.py),
and what a zip may do to the machine that unpacks it."""

from __future__ import annotations

import io
import os
import stat
import struct
import zipfile
from pathlib import Path

import pytest

from squall.errors import SquallError
from squall.runtime.manifest import IMPORTED, INCLUDED, TOPOLOGY, Entry
from squall.runtime.package import extract, pack

MB = 1024 * 1024


@pytest.fixture
def entries(tmp_path: Path) -> list[Entry]:
    (tmp_path / "bolts").mkdir()
    (tmp_path / "topology.py").write_text("T = 1\n")
    (tmp_path / "bolts" / "count.py").write_text("class Count: ...\n")
    (tmp_path / "words.txt").write_text("a b c\n")
    return [Entry("bolts/count.py", 17, IMPORTED, "bolts.count", tmp_path / "bolts" / "count.py"),
            Entry("topology.py", 6, TOPOLOGY, "topology", tmp_path / "topology.py"),
            Entry("data/words.txt", 6, INCLUDED, "data/*.txt", tmp_path / "words.txt")]


def names(blob: bytes) -> list[str]:
    with zipfile.ZipFile(io.BytesIO(blob)) as zf:
        return sorted(zf.namelist())


def test_a_package_holds_its_manifest_at_the_manifest_paths(entries: list[Entry]) -> None:
    assert names(pack(entries, 10 * MB)) == ["bolts/count.py", "data/words.txt", "topology.py"]


def test_packaging_is_capped_by_size_and_count(entries: list[Entry]) -> None:
    with pytest.raises(SquallError, match=r"3 files, over nimbus\.code\.max\.entries \(2\)"):
        pack(entries, 10 * MB, max_entries=2)
    with pytest.raises(SquallError, match=r"29 bytes unzipped, over nimbus\.code\.max\.uncompressed\.bytes"):
        pack(entries, 10 * MB, max_uncompressed_bytes=28)
    with pytest.raises(SquallError, match="over 100 bytes zipped"):
        pack(entries, 100)


def test_a_package_unpacks_private(entries: list[Entry], tmp_path: Path) -> None:
    dest = extract(pack(entries, 10 * MB), tmp_path / "code")
    assert (dest / "bolts" / "count.py").read_text() == "class Count: ...\n"
    assert stat.S_IMODE(os.stat(dest / "bolts").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(dest / "bolts" / "count.py").st_mode) == 0o600


# -- hostile zips ---------------------------------------------------------------


def zeros_zip(size: int) -> bytes:
    """One entry of ``size`` zero bytes, deflated (about 1,000 to 1)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf, zf.open("zeros.bin", "w") as f:
        chunk = bytes(MB)
        for _ in range(size // MB):
            f.write(chunk)
    return buf.getvalue()


def lie_about_size(blob: bytes, declared: int) -> bytes:
    """The same zip, its local and central headers claiming ``declared`` bytes unzipped."""
    data = bytearray(blob)
    local = data.index(b"PK\x03\x04")
    struct.pack_into("<I", data, local + 22, declared)
    central = data.index(b"PK\x01\x02")
    struct.pack_into("<I", data, central + 24, declared)
    return bytes(data)


def written(dest: Path) -> int:
    return sum(p.stat().st_size for p in dest.rglob("*") if p.is_file()) if dest.exists() else 0


@pytest.fixture(scope="module")
def bomb() -> bytes:
    blob = zeros_zip(300 * MB)
    assert len(blob) < 400 * 1024
    return blob


def test_a_zip_bomb_is_refused_before_anything_is_written(bomb: bytes, tmp_path: Path) -> None:
    dest = tmp_path / "code"
    with pytest.raises(SquallError, match=f"unzips to {300 * MB} bytes, over the limit of {10 * MB}"):
        extract(bomb, dest, max_bytes=10 * MB)
    assert not dest.exists()


def test_a_zip_bomb_whose_headers_lie_writes_no_more_than_the_cap(bomb: bytes, tmp_path: Path) -> None:
    # (zipfile stops at the declared size, and the CRC of what it read is wrong)
    dest = tmp_path / "code"
    with pytest.raises(SquallError, match="the code package cannot be unzipped: BadZipFile"):
        extract(lie_about_size(bomb, 4096), dest, max_bytes=10 * MB)
    assert written(dest) == 0  # the first 4096 bytes were written, then removed


def test_what_is_written_is_counted_whatever_the_headers_say(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # Given entries declared at 1 KB each when extract checks the total, but
    # read in full (zipfile itself stops at a declared size: this checks
    # extract's own count, the second line of defence)
    blob = zeros_zip(3 * MB)
    real_infolist = zipfile.ZipFile.infolist

    def lying_infolist(self: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
        infos = real_infolist(self)
        for info in infos:
            info.file_size = 1024
        return infos

    monkeypatch.setattr(zipfile.ZipFile, "infolist", lying_infolist)
    real_open = zipfile.ZipFile.open
    monkeypatch.setattr(zipfile.ZipFile, "open", lambda self, info, *a, **k: real_open(
        self, _honest(info), *a, **k))
    dest = tmp_path / "code"
    with pytest.raises(SquallError, match=f"more than {MB} bytes"):
        extract(blob, dest, max_bytes=MB)
    assert written(dest) == 0  # and the partial file is removed


def _honest(info: zipfile.ZipInfo) -> zipfile.ZipInfo:
    info.file_size = 3 * MB
    return info


def test_too_many_entries_are_refused(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for i in range(11):
            zf.writestr(f"f{i}.py", "")
    with pytest.raises(SquallError, match="11 entries, over the limit of 10"):
        extract(buf.getvalue(), tmp_path / "code", max_entries=10)
    assert not (tmp_path / "code").exists()


@pytest.mark.parametrize("name", ["../evil.py", "a/../../evil.py", "/tmp/evil.py", "C:/evil.py",
                                  "a\\..\\..\\evil.py"])
def test_entries_leading_out_are_refused(name: str, tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("fine.py", "x = 1\n")
        zf.writestr(zipfile.ZipInfo(name), "evil = 1\n")
    with pytest.raises(SquallError, match="escapes its directory"):
        extract(buf.getvalue(), tmp_path / "a" / "b" / "code")
    assert not (tmp_path / "a" / "b" / "code").exists()
    assert [p.name for p in tmp_path.rglob("evil.py")] == []


def test_symlink_entries_are_refused(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        link = zipfile.ZipInfo("passwd")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "/etc/passwd")
    with pytest.raises(SquallError, match="is a symlink"):
        extract(buf.getvalue(), tmp_path / "code")


def test_a_corrupt_zip_is_a_squall_error(tmp_path: Path) -> None:
    with pytest.raises(SquallError, match="not a valid zip"):
        extract(b"PK\x03\x04 not really", tmp_path / "code")
