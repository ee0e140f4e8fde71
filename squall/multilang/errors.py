"""What can go wrong between a shell component and its child process."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from squall.errors import SquallError


class MultilangError(SquallError):
    """Base class of the multilang errors."""


class ProtocolError(MultilangError):
    """A child broke the multilang protocol (garbled bytes, a bad command).

    ``decoded`` holds the messages read intact before the fault, so that a
    child's last acks are not dropped along with its garbage.
    """

    def __init__(self, message: str, decoded: list[Any] | None = None) -> None:
        super().__init__(message)
        self.decoded = list(decoded or [])


class MessageTooLarge(ProtocolError):
    """A child's message is longer than ``topology.multilang.max.message.bytes``."""


class ChildWentAway(MultilangError):
    """The child is gone as the parent sees it: silent past its timeout, or its stdout closed."""


class OutputClosed(ChildWentAway):
    """End of file on a child's stdout: it exited or crashed (its stderr says why)."""

    def __init__(self) -> None:
        super().__init__("Pipe to subprocess seems to be broken! No output read.")  # Storm's words


class ParentWentAway(MultilangError):
    """End of file on a child's stdin (the child side's view): a clean exit."""


class ShellProcessError(MultilangError):
    """An ``error`` command from a child: ``"Shell Process Exception: " + msg``, as Storm reports it."""


class ChildDied(MultilangError):
    """A child exited, hung or broke the protocol; its tuples in flight were failed."""


# The line saying why a child died, as runtimes print it: "SyntaxError: ...",
# "ModuleNotFoundError: ...", Node's "Error: Cannot find module ...", Java's
# "Exception in thread ...", Go's "panic: ...".  Else a line with the word error
# in it (Ruby's "x.rb:3: syntax error, ...", Perl's "syntax error at x.pl line 3").
_ERROR_LINE = re.compile(r"^\s*(?:Uncaught\s+)?(?:[\w$.]*(?:Error|Exception)\b|(?:error|fatal|panic)\b"
                         r"|Exception in thread\b)", re.IGNORECASE)
_ANY_ERROR = re.compile(r"\berror\b", re.IGNORECASE)
_PYTHON_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)')
_SOURCE_HEADER = re.compile(r"^((?!node:)\S*[/\\.]\S*?):(\d+)$")  # Node's "/path/file.js:3" above the error
_JS_FRAME = re.compile(r"^\s+at (?:.*\()?((?!node:)[^()\s]+?):(\d+):\d+\)?$")


def stderr_lead(lines: Sequence[str]) -> str | None:
    """The error a dying child's stderr ends with, and where (``file:line``) when the
    trace says: ``SyntaxError: Unexpected token ';' at /app/split.js:3``.  None when
    no line reads as an error."""
    found = _last(lines, _ERROR_LINE.match)
    if found is None:
        found = _last(lines, _ANY_ERROR.search)
    if found is None:
        return None
    line = lines[found].strip()
    where = _location(lines, found)
    return f"{line} at {where}" if where and where not in line else line


def _last(lines: Sequence[str], test: Any) -> int | None:
    for i in range(len(lines) - 1, -1, -1):
        if test(lines[i]) and not _JS_FRAME.match(lines[i]):
            return i
    return None


def _location(lines: Sequence[str], at: int) -> str | None:
    for i in range(at - 1, -1, -1):  # Python's innermost frame, or Node's source header, above it
        m = _PYTHON_FRAME.match(lines[i]) or _SOURCE_HEADER.match(lines[i])
        if m:
            return f"{m.group(1)}:{m.group(2)}"
    for line in lines[at + 1:]:  # Node's first frame of the user's own code below it
        m = _JS_FRAME.match(line)
        if m:
            return f"{m.group(1)}:{m.group(2)}"
    return None
