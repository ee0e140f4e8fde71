"""Debug sampling's settings (squall.runtime.debug_options): what a debug action asks, how
it is kept, and which setting each component follows."""

from __future__ import annotations

import math

import pytest

from squall.runtime.debug_options import DEFAULT_PCT, Debug, DebugOptions, conf_debug, parse_action, parse_pct


@pytest.mark.parametrize(("text", "pct"), [("10", 10.0), ("0", 0.0), ("100", 100.0), ("12.5", 12.5),
                                           (" 7 ", 7.0), (33, 33.0), (0.5, 0.5)])
def test_a_sampling_percentage_is_a_number_from_0_to_100(text: object, pct: float) -> None:
    assert parse_pct(text) == pct


@pytest.mark.parametrize("bad", ["101", "-1", "nan", "NaN", "inf", "-inf", "ten", "", "1e400", "0x10",
                                 True, math.nan, None, "1" * 40])
def test_any_other_percentage_is_refused_naming_what_was_given(bad: object) -> None:
    with pytest.raises(ValueError, match="sampling percentage must be a number from 0 to 100"):
        parse_pct(bad)


def test_the_action_is_enable_or_disable() -> None:
    assert parse_action("enable") is True
    assert parse_action("disable") is False
    for bad in ("Enable", "on", "", "enable ", None):
        with pytest.raises(ValueError, match="enable or disable"):
            parse_action(bad)


def test_a_component_follows_its_own_setting_then_the_topologys_then_its_conf() -> None:
    none = DebugOptions()
    assert none.component_pct("split") == 0.0
    assert none.component_pct("split", conf_debug=True) == 100.0  # topology.debug: true at submit
    topology = none.with_setting(None, True, 20.0)
    assert topology.component_pct("split") == 20.0
    assert topology.component_pct("split", conf_debug=True) == 20.0  # the running topology's word wins
    stopped = topology.with_setting("split", False, 50.0)  # "Stop Debug" on one component
    assert stopped.component_pct("split") == 0.0
    assert stopped.component_pct("count") == 20.0
    assert stopped.with_setting("count", True, 5.0).component_pct("count") == 5.0
    # Disabling the topology leaves a component's own setting as it was (Storm's keys are apart).
    mixed = none.with_setting("split", True, 30.0).with_setting(None, False, 10.0)
    assert (mixed.component_pct("split"), mixed.component_pct("count")) == (30.0, 0.0)


def test_the_pages_show_what_storms_show() -> None:
    assert DebugOptions().topology_setting() == Debug(False, DEFAULT_PCT)
    assert DebugOptions().topology_setting(conf_debug=True) == Debug(True, 100.0)
    on = DebugOptions().with_setting(None, True, 25.0)
    assert on.topology_setting() == Debug(True, 25.0)
    assert on.component_setting("split") == Debug(True, 25.0)
    off = on.with_setting("split", False, 25.0)
    assert off.component_setting("split") == Debug(False, DEFAULT_PCT)


def test_settings_travel_as_json_and_a_malformed_entry_is_left_out() -> None:
    options = DebugOptions().with_setting(None, True, 10.0).with_setting("split", True, 2.5)
    wire = options.to_wire()
    assert wire == {"topology": {"enable": True, "samplingpct": 10.0},
                    "components": {"split": {"enable": True, "samplingpct": 2.5}}}
    assert DebugOptions.from_wire(wire) == options
    hand_written = {"topology": {"enable": "yes"},
                    "components": {"split": {"enable": True, "samplingpct": 500}, "count": [1],
                                   "ok": {"enable": False}}}
    parsed = DebugOptions.from_wire(hand_written)
    assert parsed.topology is None and dict(parsed.components or {}) == {"ok": Debug(False, DEFAULT_PCT)}
    assert DebugOptions.from_wire(None) == DebugOptions() == DebugOptions.from_wire([])


def test_topology_debug_counts_only_when_it_is_true() -> None:
    assert conf_debug({"topology.debug": True})
    assert not conf_debug({"topology.debug": "true"}) and not conf_debug({})
