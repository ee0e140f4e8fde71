"""Topology code packages: the directory of a topology file, zipped.

Storm ships a jar; Squall ships the topology file's directory (sources and
a ``resources/`` folder, if any) so workers on other machines can import the
components by "module:Class".

What is left out, whatever the topology says: dotfiles and dot-directories
(``.env``, ``.aws/``, ``.ssh/``, ``.git/``...), other VCS directories,
virtualenvs (any directory holding a ``pyvenv.cfg``), ``__pycache__``,
``node_modules``, ``squall-local``, private-key-looking files (``id_rsa*``,
``*.pem``, ``*.key``...), the Squall keyring, and symlinks leading out of the
directory.  An ``include`` list (``topology.package.include``) narrows the
package to the files its glob patterns match (``*.py``: at the top;
``**/*.py``: anywhere; ``resources``: a whole directory); a pattern naming
one file exactly, with no wildcard, ships that file even if it would be
left out (that is how a certificate a topology needs gets in).

:func:`manifest` lists what :func:`package_dir` would pack, for the CLI to
show at submit.  Both sides cap a package's size once unzipped and its
number of files (``nimbus.code.max.uncompressed.bytes``,
``nimbus.code.max.entries``); :func:`extract` checks the sizes a zip declares
and counts the bytes it really writes, so a lying header gets no further.
"""

from __future__ import annotations

import fnmatch
import io
import os
import stat
import zipfile
import zlib
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from squall.config import DEFAULTS
from squall.errors import SquallError

# Besides every dot-directory and any virtualenv (a directory holding pyvenv.cfg).
SKIP_DIRS = {"__pycache__", "node_modules", "squall-local", "venv", "site-packages", "CVS", "_darcs", "_MTN"}
SECRET_FILES = ("id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", "*.pem", "*.key", "*.p12", "*.pfx",
                "*.jks", "*.keystore", "keyring.json")
MAX_UNCOMPRESSED = int(DEFAULTS["nimbus.code.max.uncompressed.bytes"])
MAX_ENTRIES = int(DEFAULTS["nimbus.code.max.entries"])
_CHUNK = 64 * 1024

Manifest = list[tuple[str, int]]


# -- packing -------------------------------------------------------------------


def _skip_dir(path: Path) -> bool:
    return path.name.startswith(".") or path.name in SKIP_DIRS or (path / "pyvenv.cfg").exists()


def _skip_file(name: str) -> bool:
    return name.startswith(".") or any(fnmatch.fnmatchcase(name, p) for p in SECRET_FILES)


def _inside(path: Path, root: Path) -> bool:
    """A regular file whose real path is under ``root`` (a symlink may not lead out)."""
    try:
        real = path.resolve(strict=True)
        return root in real.parents and stat.S_ISREG(real.stat().st_mode)
    except OSError:
        return False


def _pattern(pattern: str) -> tuple[str, ...]:
    pure = PurePosixPath(pattern.strip())
    if not pattern.strip() or pure.is_absolute() or ".." in pure.parts:
        msg = f"package include pattern {pattern!r} must be a relative glob inside the topology directory"
        raise SquallError(msg)
    return tuple(p for p in pure.parts if p != ".")


def _glob_match(pattern: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_glob_match(pattern[1:], parts[i:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], pattern[0]) and _glob_match(pattern[1:], parts[1:])


def _included(rel: tuple[str, ...], patterns: list[tuple[str, ...]]) -> bool:
    """The file, or a directory it is in, matches a pattern."""
    return any(_glob_match(p, rel[:k]) for p in patterns for k in range(1, len(rel) + 1))


def _walk(root: Path) -> Iterable[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not _skip_dir(here / d))
        for name in sorted(filenames):
            if not _skip_file(name):
                yield here / name


def manifest(root: str | Path, include: list[str] | None = None) -> Manifest:
    """(path relative to ``root``, size) of every file :func:`package_dir` packs, sorted."""
    root = Path(root).resolve()
    patterns = None if include is None else [_pattern(p) for p in include]
    chosen: dict[str, Path] = {}
    for path in _walk(root):
        rel = path.relative_to(root)
        if (patterns is None or _included(rel.parts, patterns)) and _inside(path, root):
            chosen[rel.as_posix()] = path
    for pattern in patterns or ():
        literal = "/".join(pattern)
        if not any(c in literal for c in "*?[") and _inside(root / literal, root):
            chosen[literal] = root / literal  # named exactly: the user's choice
    return [(rel, chosen[rel].stat().st_size) for rel in sorted(chosen)]


def check_caps(files: Manifest, max_uncompressed_bytes: int, max_entries: int, what: str) -> None:
    total = sum(size for _, size in files)
    if len(files) > max_entries:
        msg = (f"{what} has {len(files)} files, over nimbus.code.max.entries ({max_entries}); "
               "narrow it with topology.package.include")
        raise SquallError(msg)
    if total > max_uncompressed_bytes:
        msg = (f"{what} is {total} bytes unzipped, over nimbus.code.max.uncompressed.bytes "
               f"({max_uncompressed_bytes}); narrow it with topology.package.include")
        raise SquallError(msg)


def package_dir(root: str | Path, max_bytes: int, include: list[str] | None = None, *,
                max_uncompressed_bytes: int = MAX_UNCOMPRESSED, max_entries: int = MAX_ENTRIES) -> bytes:
    """The zip of :func:`manifest`'s files; ``max_bytes`` caps the zip itself."""
    root = Path(root).resolve()
    files = manifest(root, include)
    what = f"the code package of {root}"
    check_caps(files, max_uncompressed_bytes, max_entries, what)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel, _size in files:
            zf.write(root / rel, rel)
            if buf.tell() > max_bytes:
                msg = f"{what} is over {max_bytes} bytes; keep the topology in a directory of its own"
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
