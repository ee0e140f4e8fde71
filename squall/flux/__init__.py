"""Topologies in YAML, with Apache Storm's Flux schema.

    topology = squall.flux.load("examples/flux/wordcount.yaml")        # a Topology subclass
    topology = squall.flux.load("t.yaml", filter="dev.properties", env_filter=True)

The file becomes the same :class:`~squall.topology.topology.Topology` a
Python topology file defines, so ``squall local``, ``squall submit`` and
everything after them treat both alike.  ``squall flux --dry-run FILE``
prints what a file resolves to.  See docs/flux.md.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from squall.flux.parser import FluxError

__all__ = ["FLUX_SUFFIXES", "FluxError", "is_flux_file", "load"]

FLUX_SUFFIXES = (".yaml", ".yml")


def is_flux_file(path: str) -> bool:
    return Path(path).suffix.lower() in FLUX_SUFFIXES


def load(path: str, filter: str | None = None, env_filter: bool = False,  # noqa: A002 - Flux's flag name
         env: Mapping[str, str] | None = None) -> Any:
    """The Topology subclass the Flux file at ``path`` defines.

    ``filter``: a ``.properties`` file for ``${key}``; ``env_filter``: replace
    ``${ENV-NAME}`` from ``env`` (default: the process environment).  The
    file's directory goes on ``sys.path``, as a Python topology file's does,
    so classes beside it import by their module name.
    """
    from squall.flux import builder, filters, parser

    properties = None
    if filter is not None:
        try:
            text = Path(filter).read_text()
        except OSError as e:
            msg = f"cannot read the filter file {filter}: {e.strerror or e}"
            raise FluxError(msg) from e
        properties = filters.parse_properties(text, filter)
    if env_filter and env is None:
        env = dict(os.environ)
    if not Path(path).is_file():
        msg = f"no such Flux file: {path}"
        raise FluxError(msg)
    directory = str(Path(path).resolve().parent)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    flux = parser.parse(path, properties, env if env_filter else None)
    try:
        return builder.build(flux)
    finally:
        flux.close()
