"""The child of a package verification, run inside nimbus's sandbox as ``python -c ...
CODE_DIR VERDICT_FD`` (squall.nimbus.package_verifier starts it): load a submitted
topology's classes in the sandbox, where user modules may do anything at import, and
say what does not load.

``{"definition", "nonce", "limits"}`` arrives on stdin as JSON.  The verdict
is one JSON line written to ``VERDICT_FD`` once every import is done:
``{"nonce", "ok": true}``, or ``{"nonce", "ok": false, "error"}``.  Success
must be said with the nonce: an exit code of 0 proves nothing (user code may
exit at import).

``error`` goes back to the submitter, so it holds only what Squall wrote: the
definition's own names, and of an exception user code raised its type (and a
missing module's name), never its message.  The message and the traceback go
to stderr, which nimbus logs.  User code runs in this process and could write
a verdict of its own: it can only lie about itself, and nothing secret is in
its sandbox to tell.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
import traceback
from typing import Any

from squall import plugins
from squall.errors import SquallError
from squall.runtime.sandbox import Limits
from squall.topology.class_check import verify_loadable
from squall.topology.topology import TopologyDef, definition_from_dict

SQUALL_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
MAX_NAME = 200


class UserCodeError(Exception):
    """An import of the package's own code raised; ``where`` says which."""

    def __init__(self, where: str, error: BaseException) -> None:
        super().__init__(where)
        self.where = where
        self.error = error


def refs(defn: TopologyDef) -> list[tuple[str, str]]:
    """(component, module) of every class the definition names: its own and its custom groupings'."""
    out = []
    for cdef in defn.components.values():
        names = [cdef.cls, *(i.grouping.custom for i in cdef.inputs if i.grouping.type == "custom")]
        out += [(cdef.name, n.partition(":")[0]) for n in names if isinstance(n, str) and ":" in n]
    return out


def import_modules(defn: TopologyDef) -> None:
    """Import each module the definition names first, so that an exception user code raises
    there is told with the component it belongs to (verify_loadable lets all but an
    ImportError through bare, and quotes that one's message)."""
    for component, module in refs(defn):
        try:
            importlib.import_module(module)
        except Exception as e:  # noqa: BLE001 - user code raised at import, or a module is missing
            where = f"topology {defn.name}: component {component!r}: importing module {module!r}"
            raise UserCodeError(where, e) from e


def said_by_squall(e: BaseException) -> bool:
    """A SquallError raised with no frame but Squall's on its way: its message is Squall's
    own (user code that raises one, or calls a Squall helper that does, is not believed)."""
    frames = traceback.extract_tb(e.__traceback__)
    return isinstance(e, SquallError) and all(
        f.filename.startswith(SQUALL_DIR + os.sep) for f in frames)


def kind(e: BaseException) -> str:
    """What may be told of an exception user code raised: its type, and which module or
    attribute was missing when that is a plain name."""
    name = type(e).__name__
    text = name if DOTTED.match(name) and len(name) <= MAX_NAME else "an exception"
    missing = getattr(e, "name", None) if isinstance(e, (ImportError, AttributeError)) else None
    if isinstance(missing, str) and DOTTED.match(missing) and len(missing) <= MAX_NAME:
        what = "module" if isinstance(e, ImportError) else "attribute"
        text += f" (no {what} {missing!r})"
    return text


def describe(e: BaseException) -> str:
    """The submitter's message for ``e``: Squall's words, with any user exception's message
    in them (resolve_class quotes its ImportError) replaced by :func:`kind`."""
    if isinstance(e, UserCodeError):
        return f"{e.where} raised {kind(e.error)}"
    if not said_by_squall(e):
        return f"importing the topology's code raised {kind(e)}"
    text = str(e)
    cause = e.__cause__
    if cause is None:
        return text
    quoted, told = str(cause), (describe(cause) if said_by_squall(cause) else kind(cause))
    if quoted and text.endswith(quoted):
        return text[: -len(quoted)] + told
    return text.replace(quoted, told) if quoted else text


def verdict(defn: Any) -> dict[str, Any]:
    try:
        definition = definition_from_dict(defn)
        import_modules(definition)
        verify_loadable(definition)
    except Exception as e:  # noqa: BLE001 - user code raised at import, or a class is wrong
        # To stderr: nimbus's log, never the submitter.
        traceback.print_exception(e.error if isinstance(e, UserCodeError) else e)
        return {"ok": False, "error": describe(e)}
    return {"ok": True}


def main(argv: list[str]) -> int:
    code_dir, verdict_fd = argv[0], int(argv[1])
    request = json.load(sys.stdin)
    # Limits that count per user are set here, inside the sandbox's user namespace
    # (squall.nimbus.package_verifier); the rest were set before the sandbox started.
    Limits(**request.get("limits", {})).apply()
    plugins.add_import_roots()  # a streamparse project's ``streamparse``, as its workers have it
    sys.path.insert(0, code_dir)
    said = {**verdict(request["definition"]), "nonce": request["nonce"]}
    with os.fdopen(verdict_fd, "w") as out:
        out.write(json.dumps(said) + "\n")
    return 0 if said["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
