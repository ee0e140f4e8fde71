"""Writing Flux files for tests, and reading their errors."""

from __future__ import annotations

from pathlib import Path

import pytest

import squall.flux
from squall.flux import FluxError

# The valid file the error tests break one line of; line numbers in the comments.
BASE = """\
name: "t"
spouts:
  - id: "words"
    className: "tests.flux.parts.Words"
    constructorArgs: ["a", "b"]
bolts:
  - id: "sink"
    className: "tests.flux.parts.Sink"
streams:
  - from: "words"
    to: "sink"
    grouping:
      type: FIELDS
      args: ["word"]
"""


def write(directory: Path, text: str, name: str = "topology.yaml") -> Path:
    path = directory / name
    path.write_text(text)
    return path


def error_of(path: Path, **kwargs: object) -> str:
    with pytest.raises(FluxError) as info:
        squall.flux.load(str(path), **kwargs)  # type: ignore[arg-type]
    return str(info.value)


def assert_points_at(message: str, path: Path, line: int, key: str) -> None:
    """The message names the file, the line and the key."""
    assert message.startswith(f"{path}:{line}: key {key!r}: "), message
