"""The Tuple (squall/topology/tuple.py, one source) behaves as a plain record of its
fields does, for everything a bolt, a feature or the wire reads and writes on it: run
both built and with SQUALL_PURE_PYTHON=1 (its C fields, then its plain slots)."""

from __future__ import annotations

import copy
import dis
import pickle
import sys
import types
from typing import Any

import pytest

from squall import compiled
from squall.topology import tuple as tuple_module
from squall.topology.tuple import Tuple, record_type

BUILT = tuple_module.__file__.endswith(compiled.SUFFIX)  # this process runs the Tuple compiled
needs_build = pytest.mark.skipif(not BUILT,
                                 reason="SQUALL_PURE_PYTHON=1: nothing is built")
WORD = record_type(("word", "n"))
TOP = (1 << 64) - 1


class Model:
    """What a Tuple is, as plain attributes: the reference both runs are compared with."""

    def __init__(self, id: Any, component: str, stream: str, task: int, values: Any,  # noqa: A002
                 anchors: Any = None) -> None:
        self.id, self.component, self.stream, self.task = id, component, stream, task
        self.values, self.anchors, self.ackval = values, anchors, 0

    def __getitem__(self, field: str) -> Any:
        return getattr(self.values, field)

    @property
    def is_tick(self) -> bool:
        return self.stream == "__tick"

    def __repr__(self) -> str:
        return (f"Tuple(id={self.id!r}, component={self.component!r}, stream={self.stream!r}, "
                f"task={self.task!r}, values={tuple(self.values)!r})")


def fields(t: Any) -> tuple[Any, ...]:
    named = (t["word"], t.values.n) if hasattr(t.values, "_fields") else ()
    return (t.id, t.component, t.stream, t.task, t.values, t.anchors, t.ackval, t.is_tick, repr(t), *named)


def test_the_build_is_the_tuple_every_module_gets() -> None:
    from squall import Tuple as exported

    assert Tuple is exported
    build = compiled.build_path("squall.topology.tuple")
    assert (compiled.enabled() and build is not None and build.is_file()) == BUILT


@pytest.mark.parametrize("anchors", [None, {}, {5: 7}, {0: TOP}, {TOP: 0, 3: 4}, {1 << 64: 1}, {-1: 2},
                                     {"x": 1}, {5: None}])
@pytest.mark.parametrize("tid", [None, 7, TOP, "msg-1"])
def test_every_field_reads_as_a_plain_record_of_them_reads_it(anchors: Any, tid: Any) -> None:
    made = [cls(tid, "split", "default", 3, WORD("cow", 2), anchors) for cls in (Model, Tuple)]
    assert fields(made[0]) == fields(made[1])
    for t in made:  # and as they are written: the acking XOR, a new id, new anchors
        t.ackval ^= TOP
        t.ackval ^= 5
        t.id = "other"
        t.task = 4
        t.stream = "__tick"
    assert fields(made[0]) == fields(made[1])
    for t in made:
        t.anchors = {9: 10}
        t.anchors = anchors
    assert fields(made[0]) == fields(made[1])


@needs_build
def test_an_id_that_is_the_edge_survives_new_anchors() -> None:
    # Given a tuple as the emitters make it: its id is its edge, kept once
    batches: dict[int, list[Any]] = {1: []}
    from squall.worker.executors import emit as collector
    from squall.worker.executors import routing

    so = collector.StreamOut("default", WORD, ("word", "n"), routing.all_tasks([1]), False)
    state = collector.TaskState()
    state.current = Tuple(5, "spout", "default", 1, WORD("a", 1), {77: 5})
    emit = collector.bolt_emitter("split", 2, {"default": so}, {1: batches[1].append}, True,
                                   collector.RandomIds(), lambda *a: None, False, None, True, state)
    emit(["cow", 1])
    (child,) = batches[1]
    edge = child.id
    assert child.anchors == {77: edge} and state.current.ackval == edge
    # When its anchors change, the id stays what it was
    child.anchors = None
    assert child.id == edge and child.anchors is None


def test_it_pickles_copies_and_refuses_unknown_attributes() -> None:
    t = Tuple(7, "split", "default", 3, ("cow", 2), {5: 7})  # a values record is a local class
    t.ackval = 9
    for back in (pickle.loads(pickle.dumps(t)), copy.copy(t), copy.deepcopy(t)):
        assert fields(back)[:9] == fields(t)[:9]
    with pytest.raises(AttributeError):
        Tuple(1, "c", "s", 1, WORD("a", 1)).other = 1  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        Tuple(1, "c", "s", 1, WORD("a", 1))["missing"]


def test_its_fields_are_slots_the_interpreter_reads_inline() -> None:
    # Read and written as __slots__ are: member descriptors, not properties,
    # which CPython 3.11 specializes (LOAD_ATTR_SLOT) where a bolt reads tup.values
    t = Tuple(1, "c", "s", 1, WORD("a", 1))
    for name in ("component", "stream", "task", "values"):
        assert type(vars(Tuple)[name]) is types.MemberDescriptorType
    t.values, t.task = WORD("b", 2), 4
    assert t["word"] == "b" and t.task == 4

    def read(tup: Any) -> Any:
        return tup.values

    for _ in range(64):
        assert read(t) is t.values
    if sys.version_info[:2] == (3, 11):
        assert [i.opname for i in dis.get_instructions(read, adaptive=True)
                if i.argval == "values"] == ["LOAD_ATTR_SLOT"]


@pytest.mark.skipif(not BUILT, reason="SQUALL_PURE_PYTHON=1: a plain slot, read by no C code")
def test_a_field_cannot_be_deleted_from_under_the_c_code_that_reads_it() -> None:
    t = Tuple(1, "c", "s", 1, WORD("a", 1))
    for name in ("values", "component", "stream", "task", "id", "anchors"):
        with pytest.raises(AttributeError, match=f"a tuple's {name} cannot be deleted"):
            delattr(t, name)
    assert t["word"] == "a"


def test_a_subclass_is_still_a_tuple() -> None:
    class Marked(Tuple):  # type: ignore[misc, valid-type]
        __slots__ = ("mark",)

    m = Marked(1, "c", "s", 1, WORD("a", 1), {2: 3})
    m.mark = True
    assert isinstance(m, Tuple) and m.anchors == {2: 3} and m.mark


@needs_build
def test_values_records_come_back_from_the_free_list_as_new_records_of_their_own_type() -> None:
    """The build's record free list (tuple.pxd): a freed record's memory is the next record of its
    length, of whichever stream's type, holding only what was emitted into it."""
    import gc
    import sys

    from squall.worker.executors import emit as collector

    # Types of fields no other test uses: no record of theirs lives on elsewhere
    from squall.worker.executors import routing
    one, other = record_type(("pooled_word",)), record_type(("pooled_sentence",))
    out: list[Any] = []
    emitters = {}
    for record, name in ((one, "word"), (other, "sentence")):
        so = collector.StreamOut(name, record, record._fields, routing.all_tasks([1]), False)
        emitters[name] = collector.bolt_emitter("split", 2, {name: so}, {1: out.append}, False,
                                                 collector.RandomIds(), lambda *a: None, False, None, True,
                                                 collector.TaskState())
    refs = sys.getrefcount(one)
    # Given records freed into the list
    for i in range(100):
        emitters["word"]([f"w{i}"], stream="word")
    out.clear()
    pooled = tuple_module.pooled_records().get(1, 0)
    assert pooled >= 100
    # When records of another type of that length are made, they are taken from it
    for i in range(50):
        emitters["sentence"]([f"s{i}"], stream="sentence")
    assert tuple_module.pooled_records().get(1, 0) == pooled - 50
    # Then each is a fresh record of its own type, its value read by index, name and field
    for i, t in enumerate(out):
        assert type(t.values) is other and tuple(t.values) == (f"s{i}",)
        assert t.values.pooled_sentence == t["pooled_sentence"] == t.values[0] == f"s{i}"
        assert not gc.is_tracked(t.values) and not gc.is_tracked(t)  # strings only: in no cycle
    # and the types' references balance once they are all gone
    out.clear()
    gc.collect()
    assert sys.getrefcount(one) == refs
    # A record of a subclass, or of a length not pooled, is freed as any object is
    class Longer(one):  # type: ignore[misc, valid-type]
        pass

    Longer("x").extra = 1  # type: ignore[attr-defined]
    assert record_type(tuple(f"f{i}" for i in range(12)))(*range(12))[11] == 11


@needs_build
def test_a_record_that_could_be_in_a_cycle_is_tracked_and_its_cycle_collected() -> None:
    """Records of strings and numbers are left out of the cyclic collector; one holding a
    container is not, so a cycle through it is still freed."""
    import gc
    import weakref

    from squall.worker.executors import emit as collector
    from squall.worker.executors import routing

    record = record_type(("cyclic_word", "cyclic_n"))
    out: list[Any] = []
    so = collector.StreamOut("s", record, record._fields, routing.all_tasks([1]), False)
    emit = collector.bolt_emitter("split", 2, {"s": so}, {1: out.append}, False, collector.RandomIds(),
                                   lambda *a: None, True, None, True, collector.TaskState())
    emit(["w", 1.5], stream="s")
    emit(["w", None], stream="s")
    assert not any(gc.is_tracked(t.values) for t in out)

    class Marker:
        pass

    marker = Marker()
    gone = weakref.ref(marker)
    box: list[Any] = [marker]
    emit(["w", box], stream="s")
    values = out[-1].values
    assert gc.is_tracked(values)
    box.append(values)  # the record holds the list, the list the record
    del box, values, marker
    out.clear()
    gc.collect()
    assert gone() is None
