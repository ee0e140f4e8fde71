"""Errors nimbus's API answers with (re-exported by :mod:`squall.nimbus.service`)."""

from __future__ import annotations

from squall.errors import SquallError


class ApiError(SquallError):
    """An API request that cannot be served; ``status`` is the HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)
