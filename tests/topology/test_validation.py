"""Definition-time validation: defining a bad Topology subclass raises
TopologyValidationError naming what is wrong; good ones build a definition."""

from __future__ import annotations

import json
from typing import Any

import pytest

from squall import Bolt, CustomGrouping, Grouping, Spout, Stream, Topology, TopologyValidationError
from squall.topology.component import ComponentSpec


class Words(Spout):
    outputs = ["word"]


class Pairs(Spout):
    outputs = ["word", "count"]


class MultiStream(Spout):
    outputs = [Stream(["word"], name="words"), Stream(["n"], name="numbers")]


class DirectOut(Bolt):
    outputs = [Stream(["x"], name="d", direct=True)]

    def process(self, tup: Any) -> None:
        pass


class Split(Bolt):
    outputs = ["word"]

    def process(self, tup: Any) -> None:
        self.emit([tup.values[0]])


class Sink(Bolt):
    def process(self, tup: Any) -> None:
        pass


class NotAComponent:
    """Neither a Spout nor a Bolt."""


class LastTask(CustomGrouping):
    def choose_tasks(self, task_id: int, values: Any) -> list[int]:
        return [self.target_tasks[-1]]


def invalid(*fragments: str):
    """Context manager: the block must raise TopologyValidationError whose
    message contains every fragment."""
    return _Invalid(fragments)


class _Invalid:
    def __init__(self, fragments: tuple[str, ...]) -> None:
        self.fragments = fragments
        self.raises = pytest.raises(TopologyValidationError)

    def __enter__(self) -> Any:
        self.info = self.raises.__enter__()
        return self.info

    def __exit__(self, *exc: Any) -> bool:
        suppressed = self.raises.__exit__(*exc)
        message = str(self.info.value)
        for fragment in self.fragments:
            assert fragment in message, f"{fragment!r} not in error message {message!r}"
        return suppressed


# -- inputs -----------------------------------------------------------------


def test_unknown_input_component_name() -> None:
    with invalid("'sink'", "unknown input component", "'nope'"):

        class T(Topology):
            words = Words.spec()
            sink = Sink.spec(inputs=["nope"])


def test_unknown_input_component_name_in_mapping() -> None:
    with invalid("unknown input component", "'missing'"):

        class T(Topology):
            words = Words.spec()
            sink = Sink.spec(inputs={"missing": Grouping.shuffle()})


def test_input_spec_not_part_of_topology() -> None:
    outside = Words.spec(name="outside")

    with invalid("'sink'", "not a component of this topology"):

        class T(Topology):
            words = Words.spec()
            sink = Sink.spec(inputs=[outside])


def test_input_spec_from_another_topology_with_same_name() -> None:
    class Other(Topology):
        words = Words.spec()

    with invalid("not a component of this topology"):

        class T(Topology):
            words = Words.spec()  # same name, different spec object
            sink = Sink.spec(inputs=[Other.words])


def test_unnamed_input_spec_not_part_of_topology() -> None:
    stray = Words.spec()  # never assigned, so it has no name

    with invalid("not a component of this topology"):

        class T(Topology):
            words = Words.spec()
            sink = Sink.spec(inputs=[stray])


def test_unknown_input_stream() -> None:
    with invalid("'sink'", "'words'", "no stream 'nope'", "default"):

        class T(Topology):
            words = Words.spec()
            sink = Sink.spec(inputs=[words["nope"]])


def test_default_stream_of_component_without_default_stream() -> None:
    with invalid("no stream 'default'", "numbers", "words"):

        class T(Topology):
            multi = MultiStream.spec()
            sink = Sink.spec(inputs=[multi])


def test_input_that_is_not_a_grouping() -> None:
    with invalid("expected a Grouping", "'shuffle'"):

        class T(Topology):
            words = Words.spec()
            sink = Sink.spec(inputs={words: "shuffle"})


def test_input_of_wrong_type() -> None:
    with invalid("inputs must be", "42"):

        class T(Topology):
            words = Words.spec()
            sink = Sink.spec(inputs=[42])


# -- groupings --------------------------------------------------------------


def test_fields_grouping_on_undeclared_field() -> None:
    with invalid("'sink'", "fields grouping", "'colour'", "'words'", "['word']"):

        class T(Topology):
            words = Words.spec()
            sink = Sink.spec(inputs={words: Grouping.fields("colour")})


def test_fields_grouping_with_one_good_one_bad_field() -> None:
    with invalid("'cnt'"):

        class T(Topology):
            pairs = Pairs.spec()
            sink = Sink.spec(inputs={pairs: Grouping.fields("word", "cnt")})


def test_fields_grouping_checks_the_subscribed_stream() -> None:
    # "n" exists on stream "numbers", not on "words".
    with invalid("'n'", "'words'"):

        class T(Topology):
            multi = MultiStream.spec()
            sink = Sink.spec(inputs={multi["words"]: Grouping.fields("n")})


def test_partial_key_on_undeclared_field() -> None:
    with invalid("partial_key grouping", "'user'"):

        class T(Topology):
            words = Words.spec()
            sink = Sink.spec(inputs={words: Grouping.partial_key("user")})


def test_direct_grouping_on_non_direct_stream() -> None:
    with invalid("'sink'", "direct grouping", "'words'", "not declared direct"):

        class T(Topology):
            words = Words.spec()
            sink = Sink.spec(inputs={words: Grouping.direct()})


@pytest.mark.parametrize(
    "grouping",
    [Grouping.shuffle(), Grouping.fields("x"), Grouping.all(), Grouping.global_(), Grouping.custom(LastTask)],
    ids=["shuffle", "fields", "all", "global", "custom"],
)
def test_non_direct_grouping_on_direct_stream(grouping: Any) -> None:
    with invalid("'sink'", "stream 'd'", "'router'", "direct stream"):

        class T(Topology):
            words = Words.spec()
            router = DirectOut.spec(inputs=[words])
            sink = Sink.spec(inputs={router["d"]: grouping})


def test_subscribing_twice_to_the_same_stream() -> None:
    with invalid("'sink'", "subscribes twice", "'default'", "'words'"):

        class T(Topology):
            words = Words.spec()
            sink = Sink.spec(inputs={words: Grouping.shuffle(), "words": Grouping.fields("word")})


def test_subscribing_twice_in_a_list() -> None:
    with invalid("subscribes twice"):

        class T(Topology):
            words = Words.spec()
            sink = Sink.spec(inputs=[words, words["default"]])


# -- names ------------------------------------------------------------------


def test_duplicate_component_names() -> None:
    with invalid("duplicate component name", "'same'"):

        class T(Topology):
            a = Words.spec(name="same")
            b = Words.spec(name="same")


def test_explicit_name_colliding_with_attribute_name() -> None:
    with invalid("duplicate component name", "'words'"):

        class T(Topology):
            words = Words.spec()
            other = Words.spec(name="words")


def test_same_spec_assigned_twice() -> None:
    with invalid("same spec", "'first'", "'second'"):

        class T(Topology):
            first = Words.spec()
            second = first


def test_reserved_component_name() -> None:
    with invalid("'__system'", "reserved"):

        class T(Topology):
            words = Words.spec(name="__system")


def test_reserved_stream_name() -> None:
    class Ticky(Spout):
        outputs = [Stream(["x"], name="__tick")]

    with invalid("'__tick'", "reserved"):

        class T(Topology):
            words = Ticky.spec()


def test_duplicate_field_name_in_stream() -> None:
    with invalid("'words'", "field 'word' twice"):

        class T(Topology):
            words = Words.spec(outputs=["word", "n", "word"])


def test_duplicate_stream_name() -> None:
    with invalid("stream 'a'", "twice"):

        class T(Topology):
            words = Words.spec(outputs=[Stream(["x"], name="a"), Stream(["y"], name="a")])


@pytest.mark.parametrize("bad", ["1x", "with space", "_private", ""])
def test_field_names_must_be_identifiers(bad: str) -> None:
    with invalid(repr(bad)):

        class T(Topology):
            words = Words.spec(outputs=[bad])


# -- component kinds --------------------------------------------------------


def test_spout_with_inputs_via_spec() -> None:
    with invalid("cannot have inputs"):

        class T(Topology):
            words = Words.spec()
            more = Words.spec(inputs=[words])


def test_spout_with_inputs_via_component_spec() -> None:
    with invalid("'more'", "spout cannot have inputs"):

        class T(Topology):
            words = Words.spec()
            more = ComponentSpec(Words, "spout", inputs=["words"])


def test_topology_without_spout() -> None:
    with invalid("at least one spout"):

        class T(Topology):
            a = Split.spec()
            b = Sink.spec(inputs=[a])


def test_topology_without_components() -> None:
    with invalid("no components"):

        class T(Topology):
            pass


@pytest.mark.parametrize("par", [0, -1, "2", 1.5, True])
def test_bad_parallelism(par: Any) -> None:
    with invalid("'sink'", "par must be an integer >= 1", repr(par)):

        class T(Topology):
            words = Words.spec()
            sink = Sink.spec(inputs=[words], par=par)


def test_bad_task_count() -> None:
    with invalid("'sink'", "tasks must be an integer >= 1"):

        class T(Topology):
            words = Words.spec()
            sink = Sink.spec(inputs=[words], tasks=0)


def test_component_class_not_a_bolt() -> None:
    with invalid("'sink'", "NotAComponent", "not a Bolt subclass"):

        class T(Topology):
            words = Words.spec()
            sink = ComponentSpec(NotAComponent, "bolt", inputs=[words])


def test_component_class_not_a_spout() -> None:
    with invalid("'words'", "not a Spout subclass"):

        class T(Topology):
            words = ComponentSpec(Split, "spout")


def test_component_instance_instead_of_class() -> None:
    with invalid("not a Bolt subclass"):

        class T(Topology):
            words = Words.spec()
            sink = ComponentSpec(Sink(), "bolt", inputs=[words])


# -- config -----------------------------------------------------------------


def test_bad_topology_config_value_type() -> None:
    with invalid("'topology.workers'", "'two'"):

        class T(Topology):
            config = {"topology.workers": "two"}
            words = Words.spec()


def test_bad_topology_config_value_range() -> None:
    with invalid("'topology.workers'", "0"):

        class T(Topology):
            config = {"topology.workers": 0}
            words = Words.spec()


def test_bad_component_config_value_type() -> None:
    with invalid("'sink'", "'topology.tick.tuple.freq.secs'", "'often'"):

        class T(Topology):
            words = Words.spec()
            sink = Sink.spec(inputs=[words], config={"topology.tick.tuple.freq.secs": "often"})


def test_unknown_config_keys_pass_through() -> None:
    class T(Topology):
        config = {"my.own.key": object.__name__}
        words = Words.spec(config={"another.key": [1, 2]})

    defn = T.definition()
    assert defn.config["my.own.key"] == "object"
    assert defn.components["words"].config == {"another.key": [1, 2]}


# -- valid topologies -------------------------------------------------------


def test_bolt_subscribing_to_itself_is_allowed() -> None:
    class T(Topology):
        words = Words.spec()
        loop = Split.spec(inputs=[words, "loop"])

    inputs = {(i.component, i.stream) for i in T.definition().components["loop"].inputs}
    assert inputs == {("words", "default"), ("loop", "default")}


def test_cycle_through_a_downstream_bolt_is_allowed() -> None:
    class T(Topology):
        words = Words.spec()
        a = Split.spec(inputs=[words, "b"])
        b = Split.spec(inputs={a: Grouping.fields("word")})

    comps = T.definition().components
    assert [i.component for i in comps["a"].inputs] == ["words", "b"]
    assert [(i.component, i.grouping.type, i.grouping.fields) for i in comps["b"].inputs] == [
        ("a", "fields", ("word",))
    ]


def test_multiple_named_streams() -> None:
    class T(Topology):
        multi = MultiStream.spec()
        by_word = Sink.spec(inputs={multi["words"]: Grouping.fields("word")})
        by_number = Sink.spec(inputs={multi["numbers"]: Grouping.fields("n")})
        both = Sink.spec(inputs=[multi["words"], multi["numbers"]])

    comps = T.definition().components
    assert set(comps["multi"].streams) == {"words", "numbers"}
    assert comps["multi"].streams["numbers"].fields == ("n",)
    assert [(i.stream, i.grouping.fields) for i in comps["by_word"].inputs] == [("words", ("word",))]
    assert [(i.stream, i.grouping.fields) for i in comps["by_number"].inputs] == [("numbers", ("n",))]
    assert {(i.stream, i.grouping.type) for i in comps["both"].inputs} == {
        ("words", "shuffle"),
        ("numbers", "shuffle"),
    }


def test_string_component_names_as_input_keys() -> None:
    class T(Topology):
        pairs = Pairs.spec(name="source")
        sink = Sink.spec(inputs={"source": Grouping.fields("count")})
        other = Sink.spec(inputs="source")

    comps = T.definition().components
    assert set(comps) == {"source", "sink", "other"}
    assert [(i.component, i.grouping.type, i.grouping.fields) for i in comps["sink"].inputs] == [
        ("source", "fields", ("count",))
    ]
    assert [(i.component, i.grouping.type) for i in comps["other"].inputs] == [("source", "shuffle")]


def test_explicit_name_is_used_by_spec_references() -> None:
    class T(Topology):
        words = Words.spec(name="the-words")
        sink = Sink.spec(inputs=[words])

    comps = T.definition().components
    assert set(comps) == {"the-words", "sink"}
    assert comps["sink"].inputs[0].component == "the-words"


def test_direct_grouping_on_direct_stream_is_valid() -> None:
    class T(Topology):
        words = Words.spec()
        router = DirectOut.spec(inputs=[words])
        sink = Sink.spec(inputs={router["d"]: Grouping.direct()}, par=2)

    (inp,) = T.definition().components["sink"].inputs
    assert (inp.component, inp.stream, inp.grouping.type) == ("router", "d", "direct")
    assert T.definition().components["router"].streams["d"].direct is True


def test_tasks_and_par() -> None:
    class T(Topology):
        words = Words.spec(par=2, tasks=6)
        sink = Sink.spec(inputs=[words], par=4, tasks=2)

    comps = T.definition().components
    assert (comps["words"].par, comps["words"].tasks) == (2, 6)
    # More executors than tasks makes no sense: par is capped at tasks.
    assert (comps["sink"].par, comps["sink"].tasks) == (2, 2)


def test_definition_is_json_serializable() -> None:
    class T(Topology):
        config = {"topology.workers": 2, "topology.message.timeout.secs": 5}
        multi = MultiStream.spec(par=2)
        router = DirectOut.spec(inputs={multi["words"]: Grouping.fields("word")})
        direct = Sink.spec(inputs={router["d"]: Grouping.direct()})
        pk = Sink.spec(inputs={multi["numbers"]: Grouping.partial_key("n")}, par=3, tasks=6)
        custom = Sink.spec(inputs={multi["words"]: Grouping.custom(LastTask, flavour="last")})
        everyone = Sink.spec(inputs={multi["words"]: Grouping.all(), "loop": Grouping.global_()})
        loop = Split.spec(inputs=[multi["words"], "loop"], config={"topology.tick.tuple.freq.secs": 1})

    data = T.definition().to_dict()
    text = json.dumps(data)
    back = json.loads(text)
    assert back == data
    assert back["name"] == "T"
    assert back["config"] == {"topology.workers": 2, "topology.message.timeout.secs": 5}
    comps = {c["name"]: c for c in back["components"]}
    assert set(comps) == {"multi", "router", "direct", "pk", "custom", "everyone", "loop"}
    assert comps["multi"]["kind"] == "spout"
    assert comps["multi"]["class"] == f"{MultiStream.__module__}:MultiStream"
    assert ({s["name"]: s["fields"] for s in comps["multi"]["streams"]}
            == {"words": ["word"], "numbers": ["n"]})
    assert comps["router"]["streams"] == [{"name": "d", "fields": ["x"], "direct": True}]
    assert comps["direct"]["inputs"] == [
        {"component": "router", "stream": "d", "grouping": {"type": "direct"}}
    ]
    assert comps["pk"]["inputs"][0]["grouping"] == {"type": "partial_key", "fields": ["n"]}
    assert (comps["pk"]["par"], comps["pk"]["tasks"]) == (3, 6)
    assert comps["custom"]["inputs"][0]["grouping"] == {
        "type": "custom",
        "custom": f"{LastTask.__module__}:LastTask",
        "args": {"flavour": "last"},
    }
    assert comps["loop"]["config"] == {"topology.tick.tuple.freq.secs": 1}


def test_subclass_inherits_components() -> None:
    class Base(Topology):
        words = Words.spec()

    class Child(Base):
        sink = Sink.spec(inputs=["words"])

    assert set(Child.definition().components) == {"words", "sink"}
    assert set(Base.definition().components) == {"words"}


def test_from_specs_validates_too() -> None:
    words = Words.spec()
    with invalid("unknown input component", "'nope'"):
        Topology.from_specs("Built", {"words": words, "sink": Sink.spec(inputs=["nope"])})


def test_topology_base_class_is_abstract() -> None:
    with invalid("abstract"):
        Topology.definition()


# -- regressions found while reviewing ---------------------------------------


def test_duplicate_stream_declared_as_dicts_is_refused() -> None:
    with invalid("'a'", "declared twice"):

        class T(Topology):
            w = Words.spec(outputs=[{"name": "a", "fields": ["x"]}, {"name": "a", "fields": ["y"]}])


@pytest.mark.parametrize("attr", ["config", "definition", "from_specs"])
def test_component_named_like_a_topology_attribute_is_refused(attr: str) -> None:
    with invalid(repr(attr), "Topology attribute"):
        type("T", (Topology,), {attr: Words.spec(), "sink": Sink.spec()})


def test_a_spec_shared_by_two_topologies_takes_each_attribute_name() -> None:
    shared = Words.spec()

    class A(Topology):
        words = shared

    class B(Topology):
        w = shared
        sink = Sink.spec(inputs=[shared])

    assert sorted(A.definition().components) == ["words"]
    assert sorted(B.definition().components) == ["sink", "w"]
    assert B.definition().components["sink"].inputs[0].component == "w"


def test_custom_grouping_by_name_is_checked_at_submit() -> None:
    from squall import LocalCluster

    class T(Topology):
        words = Words.spec()
        sink = Sink.spec(inputs={words: Grouping.custom("collections:OrderedDict")})

    with LocalCluster() as cluster, invalid("collections:OrderedDict", "CustomGrouping"):
        cluster.submit("t", T)


def test_component_class_by_name_that_does_not_load_is_refused_at_submit() -> None:
    from squall import LocalCluster
    from squall.topology.component import ComponentSpec

    spec = ComponentSpec("no_such_module_xyz:Spout", "spout")
    T = Topology.from_specs("T", {"words": spec})
    with LocalCluster() as cluster, invalid("no_such_module_xyz:Spout", "cannot load"):
        cluster.submit("t", T)


# -- resources (squall.topology.resources) -----------------------------------------------


def test_a_spec_declares_memory_and_cpu_as_storms_component_keys() -> None:
    class Sized(Topology):
        words = Words.spec(par=2).set_memory_load(256, 64).set_cpu_load(50)
        split = Split.spec(inputs=[words], config={"topology.component.resources.onheap.memory.mb": 100})

    comps = Sized.definition().components
    assert comps["words"].config == {"topology.component.resources.onheap.memory.mb": 256.0,
                                     "topology.component.resources.offheap.memory.mb": 64.0,
                                     "topology.component.cpu.pcore.percent": 50.0}
    assert comps["split"].config["topology.component.resources.onheap.memory.mb"] == 100


@pytest.mark.parametrize(("call", "message"), [
    (lambda s: s.set_memory_load(-1), r"onheap\.memory\.mb must be >= 0 \(MB\), got -1"),
    (lambda s: s.set_memory_load("512"), r"onheap\.memory\.mb must be a number \(MB\), got '512'"),
    (lambda s: s.set_memory_load(128, True), r"offheap\.memory\.mb must be a number \(MB\), got True"),
    (lambda s: s.set_cpu_load(float("inf")), r"cpu\.pcore\.percent must be a number \(percent of a core\)"),
    (lambda s: s.set_cpu_load(10**7), r"over the most Squall accepts \(100000\)"),
])
def test_a_bad_declaration_is_refused_at_once(call: Any, message: str) -> None:
    with pytest.raises(TopologyValidationError, match=message):
        call(Words.spec())


def test_a_bad_value_through_the_config_keys_is_refused_when_the_topology_is_defined() -> None:
    with pytest.raises(TopologyValidationError, match=r"component 'words': topology\.component\.cpu\.pcore"):
        class Bad(Topology):
            words = Words.spec(config={"topology.component.cpu.pcore.percent": float("nan")})
    with pytest.raises(TopologyValidationError, match=r"topology\.worker\.max\.heap\.size\.mb must be"):
        class BadToo(Topology):
            config = {"topology.worker.max.heap.size.mb": float("nan")}
            words = Words.spec()
