"""Topology code packages: the files of a manifest (squall.runtime.manifest), zipped,
and unzipped on the other side.

Storm ships a jar; Squall ships the topology file, the project's modules it
imports, its shell components' resources and what its include list names,
so workers on other machines can import the components by "module:Class".

Both sides cap a package's size once unzipped and its number of files
(``nimbus.code.max.uncompressed.bytes``, ``nimbus.code.max.entries``);
:func:`extract` checks the sizes a zip declares and counts the bytes it
really writes, so a lying header gets no further.
"""

from __future__ import annotations

import io
import os
import stat
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from squall.config import DEFAULTS
from squall.errors import SquallError
from squall.runtime.manifest import Entry

MAX_UNCOMPRESSED = int(DEFAULTS["nimbus.code.max.uncompressed.bytes"])
MAX_ENTRIES = int(DEFAULTS["nimbus.code.max.entries"])
_CHUNK = 64 * 1024


# -- packing -------------------------------------------------------------------


def check_caps(files: Sequence[tuple[str, int]], max_uncompressed_bytes: int, max_entries: int,
               what: str) -> None:
    total = sum(size for _, size in files)
    if len(files) > max_entries:
        msg = (f"{what} has {len(files)} files, over nimbus.code.max.entries ({max_entries}); "
               "narrow what it includes")
        raise SquallError(msg)
    if total > max_uncompressed_bytes:
        msg = (f"{what} is {total} bytes unzipped, over nimbus.code.max.uncompressed.bytes "
               f"({max_uncompressed_bytes}); narrow what it includes")
        raise SquallError(msg)


def pack(entries: Sequence[Entry], max_bytes: int, *, max_uncompressed_bytes: int = MAX_UNCOMPRESSED,
         max_entries: int = MAX_ENTRIES, what: str = "the code package") -> bytes:
    """The zip of a manifest's files; ``max_bytes`` caps the zip itself."""
    check_caps([(e.path, e.size) for e in entries], max_uncompressed_bytes, max_entries, what)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for entry in entries:
            zf.write(entry.source, entry.path)
            if buf.tell() > max_bytes:
                msg = f"{what} is over {max_bytes} bytes zipped (nimbus.code.max.bytes)"
                raise SquallError(msg)
        # A file that grew since it was listed is counted as written.
        check_caps([(i.filename, i.file_size) for i in zf.infolist()], max_uncompressed_bytes, max_entries,
                   what)
    return buf.getvalue()


# -- unpacking -------------------------------------------------------------------


def _entry_path(info: zipfile.ZipInfo) -> tuple[str, ...]:
    """The entry's path parts, or a refusal: absolute, '..', drive, backslash, symlink."""
    name = info.filename
    mode = info.external_attr >> 16
    pure = PurePosixPath(name)
    if stat.S_ISLNK(mode):
        msg = f"code package entry {name!r} is a symlink"
        raise SquallError(msg)
    if not name or "\\" in name or "\0" in name or pure.is_absolute() or ".." in pure.parts \
            or (pure.parts and ":" in pure.parts[0]):
        msg = f"code package entry {name!r} escapes its directory"
        raise SquallError(msg)
    parts = tuple(p for p in pure.parts if p != ".")
    if not parts:
        msg = f"code package entry {name!r} has no name"
        raise SquallError(msg)
    return parts


def extract(blob: bytes, dest: str | Path, *, max_bytes: int = MAX_UNCOMPRESSED,
            max_entries: int = MAX_ENTRIES) -> Path:
    """Unzip ``blob`` into ``dest`` (0700 directories, 0600 files).

    Refused (SquallError, and what was written removed): more than
    ``max_entries`` entries, declared sizes adding up to more than
    ``max_bytes``, more than ``max_bytes`` actually written (a header that
    lies), an entry that is a symlink or leads out of ``dest``, a corrupt zip.
    """
    dest = Path(dest)
    try:
        zf = zipfile.ZipFile(io.BytesIO(blob))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError) as e:
        msg = f"the code package is not a valid zip: {e}"
        raise SquallError(msg) from e
    made: list[Path] = []
    with zf:
        infos = zf.infolist()
        if len(infos) > max_entries:
            msg = f"the code package has {len(infos)} entries, over the limit of {max_entries}"
            raise SquallError(msg)
        declared = sum(i.file_size for i in infos)
        if declared > max_bytes:
            msg = f"the code package unzips to {declared} bytes, over the limit of {max_bytes}"
            raise SquallError(msg)
        entries = [(info, _entry_path(info)) for info in infos]
        try:
            _mkdir(dest, made)
            base = dest.resolve()
            written = 0
            for info, parts in entries:
                target = dest.joinpath(*parts)
                if base not in target.resolve().parents:  # through a symlink already in dest
                    msg = f"code package entry {info.filename!r} escapes its directory"
                    raise SquallError(msg)
                if info.is_dir():
                    _mkdir(target, made)
                    continue
                _mkdir(target.parent, made)
                with zf.open(info) as src:
                    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
                    made.append(target)
                    with os.fdopen(fd, "wb") as out:
                        while chunk := src.read(_CHUNK):
                            written += len(chunk)
                            if written > max_bytes:
                                msg = (f"the code package unzips to more than {max_bytes} bytes "
                                       f"(its headers declared {declared})")
                                raise SquallError(msg)
                            out.write(chunk)
        except SquallError:
            _undo(made)
            raise
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError) as e:
            _undo(made)
            msg = f"the code package cannot be unzipped: {type(e).__name__}: {e}"
            raise SquallError(msg) from e
    return dest


def _mkdir(path: Path, made: list[Path]) -> None:
    missing = []
    for p in (path, *path.parents):
        if p.exists() or p.is_symlink():
            break
        missing.append(p)
    for p in reversed(missing):
        p.mkdir(mode=0o700)
        made.append(p)
    if path.is_symlink() or not path.is_dir():
        msg = f"code package: {path} is not a directory"
        raise SquallError(msg)


def _undo(made: list[Path]) -> None:
    for path in reversed(made):
        try:
            if path.is_dir() and not path.is_symlink():
                path.rmdir()
            else:
                path.unlink()
        except OSError:
            pass
