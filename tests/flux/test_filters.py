"""The pure core of Flux's substitution: properties files and ${...} references."""

from __future__ import annotations

import pytest

from squall.errors import ConfigError
from squall.flux.filters import parse_properties, substitute

pytestmark = pytest.mark.timeout(10)


def test_properties_files_in_their_three_separators_with_comments_and_continuations() -> None:
    text = "# comment\n! comment\n\na=1\nb: two words \nc 3\nd=x\\\n  y\ne\\:f=g\nempty=\n"
    assert parse_properties(text) == {"a": "1", "b": "two words", "c": "3", "d": "xy", "e:f": "g",
                                      "empty": ""}


def test_a_line_without_a_key_is_refused_with_its_line() -> None:
    with pytest.raises(ConfigError, match=r"dev.properties:2: cannot read"):
        parse_properties("a=1\n=oops\n", "dev.properties")


def test_substitution_keeps_lines_and_reports_what_is_missing() -> None:
    text = "a: ${x}\nb: ${ENV-HOME} ${x}\nc: ${missing}\nd: ${ENV-NOPE}\n"
    result = substitute(text, {"x": "1\n2"}, {"HOME": "/h"})
    # a value with a line break stays on its line, so later lines keep their numbers
    assert result.text == "a: 1 2\nb: /h 1 2\nc: ${missing}\nd: ${ENV-NOPE}\n"
    assert result.missing == [(3, "missing"), (4, "ENV-NOPE")]


def test_no_filters_no_substitution() -> None:
    assert substitute("a: ${x}", None, None).text == "a: ${x}"
    # --filter alone: ${ENV-X} is looked up as a property, as Storm does; --env-filter alone leaves ${key}
    assert substitute("a: ${ENV-X} ${y}", {"y": "1"}, None).text == "a: ${ENV-X} 1"
    assert substitute("a: ${ENV-X}", {"ENV-X": "p"}, None).text == "a: p"
    assert substitute("a: ${ENV-X} ${y}", None, {"X": "2"}).text == "a: 2 ${y}"
