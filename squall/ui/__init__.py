"""Squall's web UI: static HTML, JavaScript and CSS that nimbus serves at ``/`` and
``/ui/...``.  The pages read only nimbus's REST API (``/api/v1/...``); uPlot (MIT, in
``static/vendor``) draws the live plots."""

from __future__ import annotations

import mimetypes
from pathlib import Path

STATIC = Path(__file__).resolve().parent / "static"
INDEX = "index.html"
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}


def asset(name: str) -> tuple[bytes, str] | None:
    """The file ``name`` (relative to the static directory; "" is the cluster page) and its
    content type, or None when there is no such file or the name leaves the directory."""
    path = (STATIC / (name or INDEX)).resolve()
    if path.is_dir():
        path = path / INDEX
    if not path.is_relative_to(STATIC) or not path.is_file():
        return None
    kind = TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return path.read_bytes(), kind
