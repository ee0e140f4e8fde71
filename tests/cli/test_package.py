"""Code packages: what leaves the submitter's machine, and what a zip may do
to the machine that unpacks it."""

from __future__ import annotations

import io
import os
import stat
import struct
import zipfile
from pathlib import Path

import pytest

from squall.errors import SquallError
from squall.runtime.package import extract, manifest, package_dir

MB = 1024 * 1024


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "outside-secret").write_text("not yours")
    root = tree(tmp_path / "project", {
        "topology.py": "T = 1\n",
        "bolts/count.py": "class Count: ...\n",
        "resources/words.txt": "a b c\n",
        "certs/ca.pem": "PUBLIC CA\n",
        ".env": "AWS_SECRET=1\n",
        ".aws/credentials": "[default]\n",
        ".ssh/config": "Host *\n",
        ".git/config": "[core]\n",
        "bolts/.secret.json": "{}\n",
        "id_rsa": "PRIVATE\n",
        "id_rsa.pub": "PUBLIC\n",
        "server.pem": "PRIVATE\n",
        "tls.key": "PRIVATE\n",
        "keyring.json": "{}\n",
        "myenv/pyvenv.cfg": "home = /usr\n",
        "myenv/lib/site.py": "x = 1\n",
        "__pycache__/topology.cpython-311.pyc": "\0",
        "node_modules/left-pad/index.js": "x\n",
        "squall-local/workers/6700/heartbeat.json": "{}\n",
    })
    os.symlink(tmp_path / "outside-secret", root / "link-out.txt")
    os.symlink(root / "resources" / "words.txt", root / "link-in.txt")
    return root


def names(blob: bytes) -> list[str]:
    with zipfile.ZipFile(io.BytesIO(blob)) as zf:
        return sorted(zf.namelist())


def test_secrets_vcs_virtualenvs_and_caches_stay_home(project: Path) -> None:
    listed = manifest(project)
    assert listed == [("bolts/count.py", 17), ("link-in.txt", 6), ("resources/words.txt", 6),
                      ("topology.py", 6)]
    assert names(package_dir(project, 10 * MB)) == [name for name, _ in listed]


def test_an_include_list_narrows_the_package(project: Path) -> None:
    def included(*patterns: str) -> list[str]:
        return [name for name, _ in manifest(project, list(patterns))]

    assert included("*.py") == ["topology.py"]
    assert included("**/*.py") == ["bolts/count.py", "topology.py"]  # never the virtualenv's
    assert included("resources", "topology.py") == ["resources/words.txt", "topology.py"]
    assert included("**/*.pem", "**/credentials", "**/.env", "*.txt") == ["link-in.txt"]
    assert included("*") == [name for name, _ in manifest(project)]  # a directory matched: all of it
    # A file named exactly is the user's choice, even one left out by default
    assert included("certs/ca.pem") == ["certs/ca.pem"]
    assert names(package_dir(project, 10 * MB, include=["certs/ca.pem", "*.py"])) == ["certs/ca.pem",
                                                                                      "topology.py"]
    for bad in ("../outside-secret", "/etc/passwd", ""):
        with pytest.raises(SquallError, match="relative glob"):
            manifest(project, [bad])


def test_packaging_is_capped_by_size_and_count(project: Path) -> None:
    with pytest.raises(SquallError, match=r"4 files, over nimbus\.code\.max\.entries \(3\)"):
        package_dir(project, 10 * MB, max_entries=3)
    with pytest.raises(SquallError, match=r"35 bytes unzipped, over nimbus\.code\.max\.uncompressed\.bytes"):
        package_dir(project, 10 * MB, max_uncompressed_bytes=34)
    with pytest.raises(SquallError, match="over 100 bytes"):
        package_dir(project, 100)


def test_a_package_unpacks_private(project: Path, tmp_path: Path) -> None:
    dest = extract(package_dir(project, 10 * MB), tmp_path / "code")
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
