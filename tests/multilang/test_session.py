"""The pure protocol state of shell bolts and spouts, driven by hand."""

from __future__ import annotations

from typing import Any

import pytest

from squall.errors import SerializationError
from squall.multilang.errors import ProtocolError, ShellProcessError
from squall.multilang.session import BoltSession, SpoutSession
from squall.topology.tuple import Tuple


class Calls:
    def __init__(self, tasks: Any = (4,), refuse: Exception | None = None) -> None:
        self.log: list[Any] = []
        self.tasks = tuple(tasks)
        self.refuse = refuse

    def emit(self, values: Any, *args: Any, **kw: Any) -> Any:
        # the bolt fast path is positional
        kw.update(zip(("anchors", "stream", "direct_task"), args, strict=False))
        if self.refuse is not None:
            raise self.refuse
        self.log.append(("emit", values, kw))
        return self.tasks

    def __getattr__(self, name: str) -> Any:
        return lambda *a, **kw: self.log.append((name, *a))

    def named(self, name: str) -> list[Any]:
        return [c for c in self.log if c[0] == name]


def bolt(calls: Calls, registered: frozenset[str] | None = None) -> BoltSession:
    return BoltSession(emit=calls.emit, ack=calls.ack, fail=calls.fail, reply=calls.reply, log=calls.log_,
                       report=calls.report, metrics={}, registered=registered)


def tup(v: str = "x") -> Tuple:
    return Tuple(None, "src", "default", 1, (v,))


def test_tuple_message_registers_and_ack_settles_exactly_once() -> None:
    calls = Calls()
    s = bolt(calls)
    t = tup()
    msg = s.tuple_message(t)
    assert msg == {"id": msg["id"], "comp": "src", "stream": "default", "task": 1, "tuple": ("x",)}
    s.handle({"command": "ack", "id": msg["id"]})
    s.handle({"command": "ack", "id": msg["id"]})
    assert calls.named("ack") == [("ack", t)]
    [(_, error)] = calls.named("report")
    assert isinstance(error, ProtocolError) and "already acked" in str(error)


def test_emit_anchors_by_id_list_or_string_and_replies_unless_told_not_to() -> None:
    calls = Calls(tasks=(4, 5))
    s = bolt(calls)
    a, b = tup("a"), tup("b")
    ida, idb = s.tuple_message(a)["id"], s.tuple_message(b)["id"]
    s.handle({"command": "emit", "tuple": [1], "anchors": [ida, idb]})
    s.handle({"command": "emit", "tuple": [2], "anchors": ida, "stream": "s", "need_task_ids": False})
    s.handle({"command": "emit", "tuple": [3], "task": 5})
    emits = calls.named("emit")
    assert emits[0] == ("emit", [1], {"anchors": [a, b], "stream": "default", "direct_task": None})
    assert emits[1] == ("emit", [2], {"anchors": [a], "stream": "s", "direct_task": None})
    assert emits[2][2]["direct_task"] == 5
    assert calls.named("reply") == [("reply", [4, 5])]  # only the first asked


def test_anchoring_to_a_settled_id_is_fatal() -> None:
    s = bolt(Calls())
    tid = s.tuple_message(tup())["id"]
    s.handle({"command": "fail", "id": tid})
    with pytest.raises(ProtocolError, match="Anchored onto"):
        s.handle({"command": "emit", "tuple": [1], "anchors": [tid]})


@pytest.mark.parametrize("message", [{"tuple": [1]}, [1], {"command": "emit"},
                                     {"command": "emit", "tuple": [1], "task": "5"}])
def test_malformed_bolt_messages_are_fatal(message: Any) -> None:
    with pytest.raises(ProtocolError):
        bolt(Calls()).handle(message)


def test_unknown_bolt_commands_are_ignored() -> None:
    calls = Calls()
    bolt(calls).handle({"command": "bogus"})
    bolt(calls).handle({"command": "sync"})
    assert calls.log == []


def test_a_refused_emit_is_reported_answered_and_dooms_its_anchors() -> None:
    calls = Calls(refuse=SerializationError("too big"))
    s = bolt(calls)
    t = tup()
    tid = s.tuple_message(t)["id"]
    s.handle({"command": "emit", "tuple": [2 ** 70], "anchors": [tid]})
    assert calls.named("reply") == [("reply", [])]  # the child is not left waiting
    s.handle({"command": "ack", "id": tid})
    assert calls.named("fail") == [("fail", t)] and calls.named("ack") == []
    assert isinstance(calls.named("report")[0][1], SerializationError)


def test_lost_returns_everything_in_flight() -> None:
    s = bolt(Calls())
    ts = [tup(str(i)) for i in range(3)]
    ids = [s.tuple_message(t)["id"] for t in ts]
    s.handle({"command": "ack", "id": ids[0]})
    assert s.lost() == ts[1:] and s.lost() == []


def test_log_error_and_metrics() -> None:
    calls = Calls()
    s = bolt(calls, registered=frozenset({"m"}))
    s.handle({"command": "log", "msg": "hi", "level": 3})
    s.handle({"command": "error", "msg": "boom"})
    s.handle({"command": "metrics", "name": "m", "params": 5})
    s.handle({"command": "metrics", "name": "m", "params": None})
    s.handle({"command": "metrics", "name": "other", "params": 1})
    assert s.metrics == {"m": 6}
    assert calls.named("log_")[0] == ("log_", "warning", "hi")
    reports = [c[1] for c in calls.named("report")]
    assert isinstance(reports[0], ShellProcessError) and str(reports[0]) == "Shell Process Exception: boom"
    assert "Could not find metric by name[other]" in str(reports[1])


def spout(calls: Calls) -> SpoutSession:
    return SpoutSession(emit=calls.emit, send=calls.send, reply=calls.reply, log=calls.log_,
                        report=calls.report, metrics={}, registered=None)


def sent(calls: Calls) -> list[Any]:
    return [c[1] for c in calls.named("send")]


def test_spout_sends_one_command_at_a_time() -> None:
    calls = Calls()
    s = spout(calls)
    s.attach()
    s.want("activate")
    assert s.next() is False  # activate still awaits its sync
    s.want("ack", 7)
    assert sent(calls) == [{"command": "activate", "id": ""}]
    s.handle({"command": "sync"})
    assert sent(calls)[-1] == {"command": "ack", "id": 7}
    s.handle({"command": "sync"})
    assert s.next() is True and sent(calls)[-1] == {"command": "next", "id": ""}
    s.handle({"command": "emit", "tuple": ["a"], "id": "m1"})
    s.handle({"command": "emit", "tuple": ["b"], "need_task_ids": False})
    s.handle({"command": "sync"})
    assert calls.named("emit")[0] == ("emit", ["a"],
                                      {"tup_id": "m1", "stream": "default", "direct_task": None})
    assert calls.named("reply") == [("reply", [4])]
    assert not s.idle


def test_spout_notes_an_empty_next() -> None:
    s = spout(Calls())
    s.attach()
    s.next()
    s.handle({"command": "sync"})
    assert s.idle


@pytest.mark.parametrize("message", [{"command": "ack", "id": 1}, {"command": "bogus"}, {"tuple": [1]}, [1]])
def test_spout_children_may_not_ack_or_invent_commands(message: Any) -> None:
    with pytest.raises(ProtocolError):
        spout(Calls()).handle(message)


def test_spout_queue_survives_a_child() -> None:
    calls = Calls()
    s = spout(calls)
    s.attach()
    s.want("activate")
    s.handle({"command": "sync"})
    s.want("ack", "a")  # in flight when the child dies
    s.want("fail", "b")
    s.detach()
    s.want("ack", "c")  # while no child
    assert len(sent(calls)) == 2
    s.attach()
    order = [sent(calls)[-1]]
    for _ in range(3):
        s.handle({"command": "sync"})
        order.append(sent(calls)[-1])
    assert order == [{"command": "activate", "id": ""}, {"command": "ack", "id": "a"},
                     {"command": "fail", "id": "b"}, {"command": "ack", "id": "c"}]


def test_a_refused_spout_emit_is_failed_back_to_the_child() -> None:
    calls = Calls(refuse=ValueError("undeclared stream"))
    s = spout(calls)
    s.attach()
    s.next()
    s.handle({"command": "emit", "tuple": ["x"], "id": 9, "stream": "nope"})
    assert calls.named("reply") == [("reply", [])]
    s.handle({"command": "sync"})
    assert sent(calls)[-1] == {"command": "fail", "id": 9}


def _with_id(value: Any, tid: str) -> Any:
    """``value`` with the real tuple id wherever it says "ID"."""
    if value == "ID":
        return tid
    if isinstance(value, list):
        return [_with_id(v, tid) for v in value]
    if isinstance(value, dict):
        return {k: _with_id(v, tid) for k, v in value.items()}
    return value


@pytest.mark.parametrize(("message", "text"), [
    ({"command": "emit", "tuple": [1], "anchors": [["ID"]]}, "anchor that is not a tuple id"),
    ({"command": "emit", "tuple": [1], "anchors": {"id": "ID"}}, "neither a tuple id nor a list"),
    ({"command": "emit", "tuple": [1], "anchors": 1.5}, "neither a tuple id nor a list"),
    ({"command": "emit", "tuple": [1], "anchors": ["ID", False]}, "anchor that is not a tuple id"),
    ({"command": "emit", "tuple": [1], "stream": {"s": 1}}, "non-string stream"),
    ({"command": "emit", "tuple": [1], "stream": 0}, "non-string stream"),
    ({"command": "emit", "tuple": [1], "need_task_ids": "no"}, "non-boolean need_task_ids"),
    ({"command": "emit", "tuple": [1], "task": 2.0}, "non-integer direct task"),
    ({"command": "emit", "tuple": {"a": 1}}, "without a 'tuple' list"),
    ({"command": "ack", "id": ["ID"]}, "ack without a tuple id"),
    ({"command": "fail", "id": None}, "fail without a tuple id"),
    ({"command": "log", "msg": {"m": 1}}, "log with a non-string 'msg'"),
    ({"command": "error", "msg": 5}, "error with a non-string 'msg'"),
])
def test_ill_typed_bolt_fields_are_fatal_on_every_path(message: dict[str, Any], text: str) -> None:
    # handle_many (the hot path) and handle (the full one) agree, and nothing but ProtocolError escapes.
    for batch in (True, False):
        calls = Calls()
        s = bolt(calls)
        tid = s.tuple_message(tup())["id"]
        good = {"command": "emit", "tuple": [0], "anchors": [tid]}
        bad = _with_id(message, tid)
        with pytest.raises(ProtocolError, match=text):
            if batch:
                s.handle_many([good, bad])
            else:
                s.handle(bad)
        assert calls.named("ack") == [] and calls.named("fail") == []
        assert len(calls.named("emit")) == (1 if batch else 0)  # the good one before the fault went out


@pytest.mark.parametrize(("message", "text"), [
    ({"command": "emit", "tuple": [1], "stream": ["s"]}, "non-string stream"),
    ({"command": "emit", "tuple": [1], "need_task_ids": 1}, "non-boolean need_task_ids"),
    ({"command": "log", "msg": [1]}, "non-string 'msg'"),
])
def test_ill_typed_spout_fields_are_fatal(message: dict[str, Any], text: str) -> None:
    with pytest.raises(ProtocolError, match=text):
        spout(Calls()).handle(message)
