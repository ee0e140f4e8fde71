"""Every CLI test: logging as it was before.  ``main()`` configures logging onto the test's
captured stderr, which is closed after it: a later test's threads (in the same process)
would log into a closed file and die of it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)
