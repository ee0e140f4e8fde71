"""Windows refused when the topology is defined, with a message naming what is wrong."""

from __future__ import annotations

from typing import Any

import pytest

from squall import Spout, Topology, TopologyValidationError
from squall.windowing import Count, Duration, WindowedBolt

pytestmark = pytest.mark.timeout(30)


class Numbers(Spout):
    outputs = ["n", "ts"]


class Sum(WindowedBolt):
    outputs = ["sum"]

    def process_window(self, window: Any) -> None:
        self.emit([sum(t.values.n for t in window.tuples)])


def define(topo_config: dict[str, Any] | None = None, **window: Any) -> type[Topology]:
    class T(Topology):
        numbers = Numbers.spec()
        windows = Sum.spec(inputs=[numbers], **window)
    if topo_config:
        return Topology.from_specs("T2", {"numbers": Numbers.spec(), "windows": Sum.spec(
            inputs=["numbers"], **window)}, topo_config)
    return T


@pytest.mark.parametrize(("window", "fragment"), [
    ({"window": Count(10), "tumbling": Count(5)}, "either window= (with an optional slide=) or tumbling="),
    ({"tumbling": Count(5), "slide": Count(1)}, "slide= is not allowed with tumbling="),
    ({}, "needs window=Count(n) or Duration(...), or tumbling="),
    ({"window": Count(10), "late_stream": "late"}, "late_stream= needs event time"),
    ({"window": Count(10), "lag": Duration.seconds(1)}, "lag= only applies to event time"),
    ({"window": Duration.seconds(0)}, "window= must be a positive duration"),
    ({"window": Count(5), "slide": Duration.milliseconds(0)}, "slide= must be a positive duration"),
    ({"window": 10}, "window= must be Count(n) or Duration"),
    ({"window": Count(5), "timestamp_field": "ts", "watermark_interval": Duration(0)},
     "watermark_interval= must be a positive duration"),
    ({"window": Count(5), "timestamp_field": "ts", "timestamp_extractor": "m:f"},
     "timestamp_field= or timestamp_extractor=, not both"),
    ({"window": Count(5), "timestamp_extractor": lambda t: t.values.ts}, "module-level function"),
    ({"window": Duration.seconds(20), "slide": Duration.seconds(15)},
     "window length + slide is 35000 ms, not below topology.message.timeout.secs (30 s)"),
    ({"window": Duration.seconds(5), "config": {"topology.message.timeout.secs": 5}},
     "window length + slide is 5000 ms"),
    ({"window": Count(5), "slide": Duration.seconds(1), "config": {"topology.tick.tuple.freq.secs": 3}},
     "topology.tick.tuple.freq.secs is set by the window"),
])
def test_bad_windows_are_refused_at_definition(window: dict[str, Any], fragment: str) -> None:
    with pytest.raises(TopologyValidationError) as err:
        define(**window)
    assert fragment in str(err.value)
    assert "Sum" in str(err.value) or "component 'windows'" in str(err.value)


@pytest.mark.parametrize("make", [lambda: Count(0), lambda: Count(-3), lambda: Count(1.5),
                                  lambda: Duration(-1), lambda: Duration.seconds(-2)])
def test_non_positive_sizes_are_refused(make: Any) -> None:
    with pytest.raises(TopologyValidationError, match="must be"):
        make()


def test_the_topology_message_timeout_is_checked_against_the_window() -> None:
    # A window that fits the default timeout, defined in a topology whose own timeout is shorter
    with pytest.raises(TopologyValidationError) as err:
        define(topo_config={"topology.message.timeout.secs": 10}, window=Duration.seconds(8),
               slide=Duration.seconds(4))
    assert "component 'windows'" in str(err.value)
    assert "12000 ms" in str(err.value)
    # while a count window does not depend on time
    define(topo_config={"topology.message.timeout.secs": 1}, window=Count(10_000))


def test_the_spec_sets_the_ticks_its_window_needs() -> None:
    defn = define(window=Duration.seconds(10), slide=Duration.seconds(2)).definition()
    assert defn.components["windows"].config["topology.tick.tuple.freq.secs"] == 2
    defn = define(tumbling=Duration.seconds(5), timestamp_field="ts",
                  watermark_interval=Duration.milliseconds(250)).definition()
    assert defn.components["windows"].config["topology.tick.tuple.freq.secs"] == 0.25
    defn = define(window=Count(10), slide=Count(2)).definition()
    assert "topology.tick.tuple.freq.secs" not in defn.components["windows"].config


def test_a_late_stream_is_declared_with_storms_field() -> None:
    defn = define(tumbling=Duration.seconds(5), timestamp_field="ts", late_stream="late").definition()
    streams = defn.components["windows"].streams
    assert streams["late"].fields == ("late_tuple",)
    assert streams["default"].fields == ("sum",)


def test_the_window_spec_is_plain_data() -> None:
    import json

    defn = define(tumbling=Duration.seconds(5), timestamp_extractor="tests.windowing.test_definition:stamp",
                  lag=Duration.seconds(1)).definition()
    options = json.loads(json.dumps(defn.to_dict()))["components"][1]["options"]
    assert options["window"]["length"] == ["ms", 5000]
    assert options["window"]["timestamp_extractor"] == "tests.windowing.test_definition:stamp"
    defn = define(tumbling=Duration.seconds(5), timestamp_extractor=stamp).definition()
    assert defn.components["windows"].options["window"]["timestamp_extractor"] == \
        "tests.windowing.test_definition:stamp"


def stamp(tup: Any) -> int:
    return tup.values.ts
