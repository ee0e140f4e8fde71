"""The codecs and the parent's end of the pipes, over BytesIO (no processes)."""

from __future__ import annotations

import collections
import io
import math

import msgpack
import pytest

from squall.multilang.codec import (
    CHUNK,
    JSON_SERIALIZER,
    MAX_MESSAGE_KEY,
    MSGPACK_SERIALIZER,
    JsonCodec,
    MsgpackCodec,
    codec_for,
)
from squall.multilang.errors import ChildWentAway, MessageTooLarge, ProtocolError
from squall.multilang.protocol import (
    ShellConnection,
    anchor_ids,
    bolt_tuple,
    heartbeat,
    log_level,
    new_id,
    spout_command,
    wants_task_ids,
)


def test_json_frames_one_line_then_end() -> None:
    assert JsonCodec().encode({"command": "next", "id": ""}) == b'{"command":"next","id":""}\nend\n'
    assert JsonCodec().encode([4]) == b"[4]\nend\n"


def test_json_writes_raw_utf8_and_survives_lone_surrogates() -> None:
    assert JsonCodec().encode(["naïve ☃"]) == '["naïve ☃"]\nend\n'.encode()
    data = JsonCodec().encode(["\ud800"])
    assert data == b'["\\ud800"]\nend\n'
    assert JsonCodec().decoder().feed(data) == [["\ud800"]]


def test_json_decoder_reassembles_across_reads_and_lines() -> None:
    raw = b'{"command": "emit",\n "tuple": [1]}\nend\n{"command":"sync"}\nend\n'
    for cut in range(len(raw) + 1):
        decoder = JsonCodec().decoder()
        out = decoder.feed(raw[:cut]) + decoder.feed(raw[cut:])
        assert out == [{"command": "emit", "tuple": [1]}, {"command": "sync"}], cut


def test_json_decoder_ends_a_message_only_on_a_line_equal_to_end() -> None:
    decoder = JsonCodec().decoder()
    assert decoder.feed(b'{"msg": "end"}\nendless\n') == []
    with pytest.raises(ProtocolError):
        decoder.feed(b"end\n")  # the lines gathered so far are not JSON
    assert JsonCodec().decoder().feed(b'\n{"a": 1}\n\nend\r\n') == [{"a": 1}]  # blank lines, CRLF


def test_json_decoder_reports_garbage_keeping_what_came_before() -> None:
    with pytest.raises(ProtocolError) as e:
        JsonCodec().decoder().feed(b'{"command":"ack","id":"1"}\nend\n{not json\nend\n')
    assert "invalid JSON" in str(e.value)
    assert e.value.decoded == [{"command": "ack", "id": "1"}]
    with pytest.raises(ProtocolError, match="empty message"):
        JsonCodec().decoder().feed(b"end\n")


def test_json_keeps_big_integers_floats_and_nesting() -> None:
    value = [2 ** 70, -1.5e-300, None, {"k": [True, {"x": "y"}]}]
    assert JsonCodec().decoder().feed(JsonCodec().encode(value)) == [value]


@pytest.mark.parametrize("number", [2 ** 70, 2 ** 64, 2 ** 64 - 1, -(2 ** 63) - 1, -(2 ** 63), -(10 ** 19)])
def test_json_reads_integers_exactly_however_wide(number: int) -> None:
    # an int past 64 bits, or at the edges of them, among ordinary messages and a wire id
    raw = (b'{"command":"ack","id":"-9223372036854775808"}\nend\n'
           b'{"command":"emit","tuple":[%d, "-12345678901234567890"]}\nend\n' % number)
    out = JsonCodec().decoder().feed(raw)
    assert out == [{"command": "ack", "id": "-9223372036854775808"},
                   {"command": "emit", "tuple": [number, "-12345678901234567890"]}]
    assert type(out[1]["tuple"][0]) is int


def test_json_reads_nan_as_python_writes_it() -> None:
    out = JsonCodec().decoder().feed(b'{"command":"emit","tuple":[NaN, 0.5]}\nend\n')
    assert math.isnan(out[0]["tuple"][0]) and out[0]["tuple"][1] == 0.5


def test_json_writes_tuple_values_as_arrays_and_nan_as_null_like_storm() -> None:
    record = collections.namedtuple("record", "word count")("cat", 3)
    assert JsonCodec().encode({"tuple": record}) == b'{"tuple":["cat",3]}\nend\n'
    assert JsonCodec().encode([float("nan"), float("inf"), 1.5]) == b"[null,null,1.5]\nend\n"
    assert JsonCodec().encode({1: "int keys become strings"}) == b'{"1":"int keys become strings"}\nend\n'
    with pytest.raises(TypeError):
        JsonCodec().encode([b"bytes"])


def test_msgpack_is_raw_concatenated_values() -> None:
    codec = MsgpackCodec()
    assert codec.encode({"pid": 4242}) == bytes.fromhex("81a3706964cd1092")
    assert codec.encode({"command": "sync"}) == bytes.fromhex("81a7636f6d6d616e64a473796e63")
    assert codec.encode([4]) == bytes.fromhex("9104")
    raw = codec.encode({"a": b"\x00bin"}) + codec.encode([1, 2])
    decoder = codec.decoder()
    assert decoder.feed(raw[:3]) == []
    assert decoder.feed(raw[3:]) == [{"a": b"\x00bin"}, [1, 2]]


def test_msgpack_garbage_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        MsgpackCodec().decoder().feed(b"\xc1")  # never used in msgpack


def test_codec_for_knows_storms_and_pyleus_class_names() -> None:
    assert codec_for(None).name == "json"
    assert codec_for(JSON_SERIALIZER).name == "json"
    assert codec_for(MSGPACK_SERIALIZER).name == "msgpack"
    assert codec_for("msgpack").name == "msgpack"
    with pytest.raises(ValueError, match=r"unknown topology.multilang.serializer"):
        codec_for("com.example.Nope")


def test_handshake_over_bytesio() -> None:
    child_out = io.BytesIO(b'{"pid": 42}\nend\n{"command":"log","msg":"hi","level":2}\nend\n')
    child_in = io.BytesIO()
    conn = ShellConnection(JsonCodec(), child_out, child_in)
    assert conn.handshake({"topology.name": "t"}, {"taskid": 3}, "/tmp/pids") == 42
    assert child_in.getvalue() == (b'{"conf":{"topology.name":"t"},"pidDir":"/tmp/pids",'
                                   b'"context":{"taskid":3}}'
                                   b"\nend\n")
    assert conn.take_pending() == [{"command": "log", "msg": "hi", "level": 2}]
    with pytest.raises(ChildWentAway, match="Pipe to subprocess seems to be broken"):
        conn.read()


def test_handshake_over_bytesio_in_msgpack() -> None:
    child_out = io.BytesIO(msgpack.packb({"pid": 7}))
    child_in = io.BytesIO()
    conn = ShellConnection(MsgpackCodec(), child_out, child_in)
    assert conn.handshake({}, {}, "/p") == 7
    assert msgpack.unpackb(child_in.getvalue()) == {"conf": {}, "pidDir": "/p", "context": {}}


def test_a_first_message_that_is_not_a_pid_is_refused() -> None:
    conn = ShellConnection(JsonCodec(), io.BytesIO(b'{"command":"sync"}\nend\n'), io.BytesIO())
    with pytest.raises(ProtocolError, match="pid"):
        conn.handshake({}, {}, "/p")


def test_read_available_returns_what_one_read_completed() -> None:
    conn = ShellConnection(JsonCodec(), io.BytesIO(b'{"command":"sync"}\nend\n{"comm'), io.BytesIO())
    assert conn.read_available() == [{"command": "sync"}]
    with pytest.raises(ChildWentAway):
        conn.read_available()


class Trickle(io.RawIOBase):
    """A writer that takes at most 3 bytes per call, like a pipe near full."""

    def __init__(self) -> None:
        self.data = b""

    def writable(self) -> bool:
        return True

    def write(self, b: bytes) -> int:  # type: ignore[override]
        self.data += bytes(b[:3])
        return min(3, len(b))


def test_write_completes_partial_writes() -> None:
    sink = Trickle()
    ShellConnection(JsonCodec(), io.BytesIO(), sink).send({"command": "next", "id": ""})  # type: ignore[arg-type]
    assert sink.data == b'{"command":"next","id":""}\nend\n'


def test_message_shapes_are_storms() -> None:
    beat = heartbeat()
    assert (beat["comp"] is None and beat["stream"] == "__heartbeat" and beat["task"] == -1
            and beat["tuple"] == [])
    assert set(beat) == {"id", "comp", "stream", "task", "tuple"}
    assert spout_command("next") == {"command": "next", "id": ""}
    assert spout_command("ack", 7) == {"command": "ack", "id": 7}
    assert bolt_tuple("1", "c", "s", 3, [1]) == {"id": "1", "comp": "c", "stream": "s", "task": 3,
                                                 "tuple": [1]}
    ids = {new_id() for _ in range(1000)}
    assert len(ids) == 1000 and all(-(2 ** 63) <= int(i) < 2 ** 63 for i in ids)


def test_child_field_rules() -> None:
    assert [log_level(v) for v in (0, 1, 2, 3, 4, None, "x", 9, 2.0, True)] == [
        "trace", "debug", "info", "warning", "error", "info", "info", "info", "info", "info"]
    assert anchor_ids(None) == [] and anchor_ids("a") == ["a"] and anchor_ids(["a", 5]) == ["a", "5"]
    assert wants_task_ids({}, None) and wants_task_ids({"need_task_ids": True}, None)
    assert not wants_task_ids({"need_task_ids": False}, None)
    assert not wants_task_ids({}, 5)  # direct emits never get a reply


@pytest.mark.parametrize("anchors", [[["1"]], {"id": "1"}, 1.5, [True], True, ["1", None], [1.0]])
def test_anchors_that_are_not_tuple_ids_are_protocol_faults(anchors: object) -> None:
    with pytest.raises(ProtocolError, match="anchor"):
        anchor_ids(anchors)


# -- the cap on a child's message (topology.multilang.max.message.bytes) ---------------------

CAP = 64 * 1024


def _endless(codec: JsonCodec | MsgpackCodec) -> bytes:
    """The start of one message far longer than the cap (no end in sight)."""
    if isinstance(codec, JsonCodec):
        return b'["' + b"x" * (8 * CHUNK)
    return msgpack.packb("x" * (64 * CHUNK))[:8 * CHUNK]


@pytest.mark.parametrize("codec", [JsonCodec(), MsgpackCodec()], ids=["json", "msgpack"])
@pytest.mark.parametrize("cap", [CAP, 3 * CHUNK + 5])
def test_a_message_over_the_cap_is_refused_before_more_than_a_chunk_past_it(
        codec: JsonCodec | MsgpackCodec, cap: int) -> None:
    decoder = codec.decoder(cap)
    data = _endless(codec)
    fed = 0
    with pytest.raises(MessageTooLarge, match=rf"over the limit of {cap} bytes \({MAX_MESSAGE_KEY}\)"):
        while fed < len(data):
            fed += CHUNK
            decoder.feed(data[fed - CHUNK:fed])
    assert cap < fed <= cap + CHUNK  # it stopped at the first read past the cap


@pytest.mark.parametrize("codec", [JsonCodec(), MsgpackCodec()], ids=["json", "msgpack"])
def test_the_cap_measures_each_message_and_keeps_what_came_before(codec: JsonCodec | MsgpackCodec) -> None:
    small = [{"command": "sync"}] * 50
    fits = ["x" * (CAP - 100)]
    data = b"".join(codec.encode(m) for m in [*small, fits, *small])
    # In one read, in small reads: everything up to the cap is decoded.
    for step in (len(data), 1000):
        decoder = codec.decoder(CAP)
        out = [m for i in range(0, len(data), step) for m in decoder.feed(data[i:i + step])]
        assert out == [*small, fits, *small]
    # One byte-ish too many in a message that completes within one read: refused, the ones before kept.
    big = ["x" * (CAP + 10)]
    decoder = codec.decoder(CAP)
    with pytest.raises(MessageTooLarge) as caught:
        decoder.feed(b"".join(codec.encode(m) for m in [*small, big, *small]))
    assert caught.value.decoded == small


def test_json_cap_holds_for_crlf_framing() -> None:
    with pytest.raises(MessageTooLarge, match=f"over the limit of {CAP} bytes"):
        JsonCodec().decoder(CAP).feed(b'"' + b"x" * CAP + b'"\r\nend\r\n')


def test_msgpack_without_a_cap_reports_its_own_buffer_limit_as_a_protocol_fault() -> None:
    # (msgpack's Unpacker holds 100 MiB at most; its BufferFull used to escape the reader thread.)
    decoder = MsgpackCodec().decoder()
    with pytest.raises(MessageTooLarge, match="buffer limit"):
        decoder.feed(b"\xc6" + (200 << 20).to_bytes(4, "big"))
        for _ in range(101):
            decoder.feed(b"x" * CHUNK)
