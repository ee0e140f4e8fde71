"""What can go wrong between a shell component and its child process."""

from __future__ import annotations

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
    """End of file on a child's stdout (the parent side's view)."""


class ParentWentAway(MultilangError):
    """End of file on a child's stdin (the child side's view): a clean exit."""


class ShellProcessError(MultilangError):
    """An ``error`` command from a child: ``"Shell Process Exception: " + msg``, as Storm reports it."""


class ChildDied(MultilangError):
    """A child exited, hung or broke the protocol; its tuples in flight were failed."""
