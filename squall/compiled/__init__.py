"""The hot path, compiled: Cython builds of the modules every tuple goes through.

A tuple's life in a worker is Python bytecode from end to end (emit, route,
batch, queue, execute, ack, the acker's XOR), and the interpreter's dispatch
is a large share of its cost.  Cython compiles these modules unchanged, as
plain Python, so they keep their semantics (no type declarations, annotations
not enforced) and lose most of the dispatch.

The builds live in ``squall/_compiled/``, named by the SHA-256 of the source
they were built from.  The import hook below loads a build only when its
source is the one on disk: edit ``worker/executors/emit.py`` and the next import runs the
edited Python, never a stale build.  ``python -m squall.compiled build``
(``build.py``; ``ops/bootstrap.sh`` runs it) brings the builds up to date.
Without Cython or a C compiler nothing is built and Squall runs as pure Python.
``SQUALL_PURE_PYTHON=1`` turns the builds off for a process and its workers.

A hot-path module may keep C types in a ``.pxd`` beside it (Cython's
pure-Python mode: one source that the interpreter runs as it is and Cython
compiles typed), and C primitives there that the ``.py`` defines in Python
for the interpreter.  Every hot-path module has one source: no ``.pyx``.  A
build's name hashes the declarations it reads too (its own ``.pxd`` and those
it cimports) and the sources of the modules it cimports.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import sys
from pathlib import Path
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parent.parent
BUILD_DIR = PACKAGE_DIR / "_compiled"
PURE_ENV = "SQUALL_PURE_PYTHON"
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]

# Every module a data tuple passes through, and nothing else: compiling code
# that runs once buys nothing and makes its tracebacks harder to read.
MODULES = (
    "squall.acker.ledger",
    "squall.acker.rotating_map",
    "squall.topology.tuple",
    "squall.worker.backpressure",
    "squall.worker.executors.acker",
    "squall.worker.executors.acks",
    "squall.worker.executors.bolt",
    "squall.worker.executors.emit",
    "squall.worker.executors.component",
    "squall.worker.executors.executor",
    "squall.worker.executors.pending",
    "squall.worker.executors.queues",
    "squall.worker.executors.routing",
    "squall.worker.wire.codec",
    "squall.worker.executors.spout",
    "squall.worker.wire.transfer",
    "squall.worker.wire.transport",
    "squall.worker.wire.frames",
    "squall.worker.wire.reader",
    "squall.worker.worker",
    "squall.worker.wire.zmq_transport",
)

# Python semantics kept: functions bind and introspect like Python's, and an
# annotation is documentation, as in the interpreter (a subclass of dict
# passed where ``dict`` is annotated must still be accepted).
DIRECTIVES = {"language_level": 3, "binding": True, "annotation_typing": False}


def source_of(module: str) -> Path:
    return PACKAGE_DIR.parent.joinpath(*module.split(".")).with_suffix(".py")


def declarations() -> list[Path]:
    """Every ``.pxd`` of the package: the C types of the modules typed in pure-Python mode
    and the layouts they share (the typed Tuple's)."""
    return sorted(PACKAGE_DIR.rglob("*.pxd"))


# A cimport of a squall module, as a .pyx or .pxd writes it, or as a .py does
# (``from cython.cimports.squall.x import ...``); a plain import reads no .pxd.
CIMPORT = re.compile(r"^\s*(?:from\s+(squall[\w.]*)\s+cimport\b|cimport\s+(squall[\w.]*)"
                     r"|from\s+cython\.cimports\.(squall[\w.]*)\s+import\b)", re.MULTILINE)


def declarations_of(module: str) -> list[Path]:
    """The ``.pxd`` files a build of ``module`` reads: its own, beside its source, and
    those it cimports, and theirs in turn; a changed one must rebuild it."""
    found: list[Path] = []
    todo = [source_of(module), source_of(module).with_suffix(".pxd")]
    while todo:
        path = todo.pop()
        if not path.is_file():
            continue
        if path.suffix == ".pxd":
            if path in found:
                continue
            found.append(path)
        for m in CIMPORT.finditer(path.read_text()):
            name = m[1] or m[2] or m[3]
            todo.append(PACKAGE_DIR.parent.joinpath(*name.split(".")).with_suffix(".pxd"))
    return sorted(found)


def module_of(pxd: Path) -> str:
    return ".".join(pxd.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)


def inputs_of(module: str) -> list[Path]:
    """What a build of ``module`` depends on: its source, the declarations it reads
    (:func:`declarations_of`) and the sources of the built modules it cimports.

    A changed layout must rebuild every module that reads it; and a build whose
    cimported module runs from its edited source (its own build stale) could not
    load beside it, so it must run from its source too: both are in its name.
    """
    pxds = declarations_of(module)
    cimported = [source_of(m) for m in map(module_of, pxds) if m in MODULES and m != module]
    return [source_of(module), *pxds, *sorted(cimported)]


def build_path(module: str) -> Path | None:
    """Where the build of ``module``'s current inputs is (it may not exist)."""
    try:
        digest = hashlib.sha256()
        for path in inputs_of(module):
            digest.update(path.read_bytes())
    except OSError:
        return None
    return BUILD_DIR / f"{module}.{digest.hexdigest()[:16]}{SUFFIX}"


def enabled() -> bool:
    return os.environ.get(PURE_ENV, "") in ("", "0")


class CompiledFinder(importlib.abc.MetaPathFinder):
    """Finds the up-to-date build of a hot-path module; anything else, or a
    stale or missing build, is left to the normal import system."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in MODULES:
            return None
        so = build_path(fullname)
        if so is None or not so.is_file():
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(so))
        return importlib.util.spec_from_file_location(fullname, so, loader=loader)


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once; not with SQUALL_PURE_PYTHON)."""
    if enabled() and not any(isinstance(f, CompiledFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, CompiledFinder())


def status() -> dict[str, bool]:
    """Per hot-path module loaded in this process: does it run compiled?"""
    out = {}
    for module in MODULES:
        loaded = sys.modules.get(module)
        if loaded is not None:
            origin = getattr(getattr(loaded, "__spec__", None), "origin", "") or ""
            out[module] = origin.endswith(SUFFIX)
    return out


def summary() -> str:
    """What a worker logs when it starts: how much of its hot path runs compiled."""
    loaded = status()
    return f"{sum(loaded.values())} of the {len(loaded)} hot-path modules loaded run compiled"


def current() -> int:
    """How many builds (of the hot-path modules) a new process would load."""
    if not enabled():
        return 0
    return sum(1 for m in MODULES if (p := build_path(m)) is not None and p.is_file())
