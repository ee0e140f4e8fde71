"""The HTTP edge's one table of statuses for the services' refusals (squall.httpd.answers)."""

from __future__ import annotations

import inspect

import pytest

from squall import errors
from squall.errors import Conflict, Forbidden, InvalidRequest, NotFound, Refused, TooBusy, Unavailable
from squall.httpd.answers import REFUSED_STATUS, status_of


@pytest.mark.parametrize(("kind", "status"), [(InvalidRequest, 400), (Forbidden, 403), (NotFound, 404),
                                              (Conflict, 409), (TooBusy, 429), (Unavailable, 503)])
def test_each_kind_of_refusal_has_the_status_clients_have_always_seen(kind: type[Refused],
                                                                      status: int) -> None:
    assert status_of(kind("why")) == status


def test_every_kind_squall_defines_is_in_the_table() -> None:
    kinds = {c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, Refused)}
    assert kinds == set(REFUSED_STATUS)


def test_a_kind_derived_from_one_in_the_table_takes_its_status() -> None:
    class NoSuchLog(NotFound):
        pass

    assert status_of(NoSuchLog("gone")) == 404


def test_the_edge_own_errors_keep_their_status_and_anything_else_is_a_500() -> None:
    assert status_of(errors.ApiError(413, "too big")) == 413
    assert status_of(RuntimeError("a bug")) == 500
