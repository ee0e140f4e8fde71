"""Storm's /api/v1/topology/:id/logconfig shapes: its POST body read, its answer written."""

from __future__ import annotations

import re
from typing import Any

import pytest

from squall.ui.logconfig import components_of, logconfig_answer, logconfig_request, unmatched


def test_storms_body_sets_and_resets_names() -> None:
    body = {"namedLoggerLevels": {"ROOT": {"target_level": "debug", "timeout": 30},
                                  "com.x": {"target_level": "WARN"},
                                  "split": {"target_level": None, "timeout": 0}, "count": None}}
    assert logconfig_request(body) == {"ROOT": ("DEBUG", 30), "com.x": ("WARN", 0), "split": (None, 0),
                                       "count": (None, 0)}
    root = logconfig_request({"namedLoggerLevels": {"root": {"target_level": "INFO"}}})
    assert root == {"ROOT": ("INFO", 0)}


@pytest.mark.parametrize(("body", "says"), [
    ({}, '{"namedLoggerLevels": {NAME:'),
    ([], '{"namedLoggerLevels": {NAME:'),
    ({"namedLoggerLevels": {"ROOT": {"target_level": "LOUD"}}},
     "namedLoggerLevels['ROOT']: unknown log level 'LOUD'"),
    ({"namedLoggerLevels": {"ROOT": {"target_level": "DEBUG", "timeout": "30"}}}, "whole number of seconds"),
    ({"namedLoggerLevels": {"ROOT": {"target_level": "DEBUG", "timeout": True}}}, "whole number of seconds"),
    ({"namedLoggerLevels": {" ": {"target_level": "DEBUG"}}}, "logger name must be a non-empty string"),
    ({"namedLoggerLevels": {"ROOT": "DEBUG"}}, "namedLoggerLevels['ROOT'] must be an object"),
])
def test_a_malformed_body_is_refused_naming_what_is_wrong(body: Any, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        logconfig_request(body)


def test_the_answer_is_storms_shape() -> None:
    levels = {"ROOT": {"level": "DEBUG", "timeout_secs": 30, "expires_at": 1718000030.25},
              "split": {"level": "INFO", "timeout_secs": 0, "expires_at": None}}
    assert logconfig_answer(levels) == {"namedLoggerLevels": {
        "ROOT": {"target_level": "DEBUG", "reset_level": None, "timeout": 30, "timeout_epoch": 1718000030250},
        "split": {"target_level": "INFO", "reset_level": None, "timeout": 0, "timeout_epoch": 0}}}
    assert logconfig_answer({}) == {"namedLoggerLevels": {}}


def test_a_name_that_can_match_nothing_known_is_warned_about() -> None:
    record = {"definition": {"components": [{"name": "split"}, {"name": "count"}]}}
    changes: dict[str, tuple[str | None, int]] = {
        "splt": ("DEBUG", 0), "split": ("DEBUG", 0), "ROOT": ("INFO", 0), "squall.worker": ("DEBUG", 0),
        "gone": (None, 0), "__acker": ("DEBUG", 0)}
    warnings = unmatched(changes, "wc", components_of(record))
    assert warnings == [("'splt' is not a component of topology 'wc' (its components: count, split) nor a "
                        "dotted logger name: it covers only loggers named 'splt' or splt.*")]
