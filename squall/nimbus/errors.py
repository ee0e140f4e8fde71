"""Errors nimbus's API answers with (raised by its views, control and submission);
ApiError itself lives in squall.errors, where the web app (squall.ui) catches it."""

from __future__ import annotations

from squall.errors import ApiError

__all__ = ["ApiError", "bad_request"]


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)
