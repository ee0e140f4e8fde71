"""Topology code packages: the directory of a topology file, zipped.

Storm ships a jar; Squall ships the topology file's directory (sources and
a ``resources/`` folder, if any) so workers on other machines can import the
components by "module:Class".
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from squall.errors import SquallError

SKIP_DIRS = {"__pycache__", ".git", ".venv", "venv", ".mypy_cache", ".pytest_cache", "node_modules",
             ".tox", "squall-local"}


def package_dir(root: str | Path, max_bytes: int) -> bytes:
    root = Path(root)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root)
            if any(part in SKIP_DIRS for part in rel.parts) or not path.is_file():
                continue
            zf.write(path, rel.as_posix())
            if buf.tell() > max_bytes:
                msg = (f"the code package of {root} is over {max_bytes} bytes; "
                       "keep the topology in a directory of its own")
                raise SquallError(msg)
    return buf.getvalue()


def extract(blob: bytes, dest: str | Path) -> Path:
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(blob)) as zf:
        for name in zf.namelist():
            target = (dest / name).resolve()
            if dest.resolve() not in target.parents and target != dest.resolve():
                msg = f"code package entry {name!r} escapes its directory"
                raise SquallError(msg)
        zf.extractall(dest)
    return dest
