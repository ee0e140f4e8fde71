"""Squall's exception tree.

Everything Squall raises on purpose derives from :class:`SquallError`, so a
caller can catch the whole family.  Control-flow signals that are not errors
(a user's :class:`FailedException`) live apart from it.
"""

from __future__ import annotations


class SquallError(Exception):
    """Base class of every error Squall raises on purpose."""


class ConfigError(SquallError):
    """A configuration key has a missing, unknown or ill-typed value."""


class TopologyValidationError(SquallError):
    """A topology definition is invalid; the message names what and why."""


class SerializationError(SquallError):
    """A component emitted a value that cannot cross the wire.

    Fatal for the worker, as in Storm: it is raised outside the user's tuple
    handling path and the worker is restarted.  ``component`` and ``task``
    name the emitter when it is known.
    """

    component: str | None = None
    task: int | None = None


class WorkerDied(SquallError):
    """A worker stopped because one of its threads raised an unhandled error."""


class CoordinationError(SquallError):
    """ZooKeeper could not be reached or holds something unexpected."""


class TransportError(SquallError):
    """A transport endpoint could not be bound, connected or used."""


class ComponentError(SquallError):
    """An error a component reported, re-raised in a test thread."""


class FailedException(Exception):
    """Raised by a bolt's ``process`` to fail the current tuple on purpose.

    The tuple is failed (its spout tuple replays) and the bolt keeps going.
    It is not logged with a traceback, as it is not a bug.
    """


class DRPCExecutionError(SquallError):
    """A DRPC request that got no result: the topology failed it, it timed out, the
    server shut down or refused the caller.  ``type`` is Storm's DRPCExceptionType name
    (``FAILED_REQUEST``, ``SERVER_TIMEOUT``, ``SERVER_SHUTDOWN``, ``INTERNAL_ERROR``) or
    ``AUTHORIZATION`` for a refused caller; the message is the server's reason."""

    def __init__(self, message: str, type: str = "FAILED_REQUEST",  # noqa: A002 - Storm's field name
                 status: int | None = None) -> None:
        super().__init__(message)
        self.type = type
        self.status = status


class Refused(SquallError):
    """A request a daemon will not carry out; its message, which the caller is shown, says
    why.  Which kind it is says what the caller may do about it; the HTTP edge maps each
    kind to its status in one table (squall.httpd.answers.REFUSED_STATUS)."""


class InvalidRequest(Refused):
    """What was asked is malformed, or refused as it stands (a bad name, conf or package)."""


class Forbidden(Refused):
    """The caller may not do this (another user's state ids, a quota passed)."""


class NotFound(Refused):
    """What the request names does not exist (a topology, a component, an action)."""


class Conflict(Refused):
    """The request clashes with what is: a name in use, a topology being killed."""


class TooBusy(Refused):
    """The caller has too much under way already; the same request later may pass."""


class Unavailable(Refused):
    """This process cannot serve the request now (not the leader, no free verification
    slot, a key it lacks); another process, or a later try, may."""


class ApiError(SquallError):
    """An HTTP request that cannot be served, refused by the HTTP edge itself (a path, a
    method, a body it cannot read); ``status`` is the HTTP status.  Code below the edge
    raises :class:`Refused` instead."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
