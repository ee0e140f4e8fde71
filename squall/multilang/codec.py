"""Framing of multilang messages: bytes in, messages out, and back (pure).

Two serializers, chosen by ``topology.multilang.serializer``:

* JSON, Storm's own: each message is one JSON value, then ``\\n``, then the
  line ``end``.  Reading is by lines: a message may span several lines and
  several reads, and only a line equal to ``end`` ends it.
* msgpack, as pystorm's ``serializer="msgpack"`` mode and Yelp/pyleus's
  ``MessagePackSerializer``: concatenated msgpack values, no delimiter.

A codec encodes one message to bytes; its decoder is fed whatever a read
returned and hands back the messages completed so far.  Neither does I/O,
so both run unchanged over pipes, sockets or ``BytesIO``.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

import msgpack
import orjson

from squall.multilang.errors import ProtocolError

JSON_SERIALIZER = "org.apache.storm.multilang.JsonSerializer"
MSGPACK_SERIALIZER = "com.yelp.pyleus.serializer.MessagePackSerializer"

_END = b"end"
_END_CR = b"end\r"


class Decoder(Protocol):
    def feed(self, data: bytes) -> list[Any]: ...


class Codec(Protocol):
    name: str

    def encode(self, message: Any) -> bytes: ...

    def decoder(self) -> Decoder: ...


# -- JSON --------------------------------------------------------------------

def _not_json(value: Any) -> Any:
    msg = f"Object of type {type(value).__name__} is not JSON serializable"
    raise TypeError(msg)


def _compact(ensure_ascii: bool) -> Any:
    """A compact JSON encoder, built once: ``json.dumps`` builds its C encoder on every call."""
    make = getattr(json.encoder, "c_make_encoder", None)
    escape = json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    if make is not None:
        try:
            iterencode = make(None, _not_json, escape, None, ":", ",", False, False, True)
            return lambda value: "".join(iterencode(value, 0))
        except TypeError:  # another signature: use the public API
            pass
    return json.JSONEncoder(ensure_ascii=ensure_ascii, separators=(",", ":"), check_circular=False).encode


_utf8_encoder = _compact(ensure_ascii=False)
_ascii_encoder = _compact(ensure_ascii=True)

# orjson writes a message ~8x faster than the json module and reads ~2x faster;
# json stays the reference for what orjson refuses or would read differently.
_ORJSON_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE
# orjson reads integers exactly in [-2**63, 2**64) and others as floats; json keeps
# every int exact.  A number that may lie outside (20 digits, or a minus sign and
# 19) sends the read to json.  Found by mapping digits to "0", quotes to "q" (so a
# wire id, a quoted minus and 19 digits, is not taken for one) and anything else
# but "-" to "x": a regex scan costs 10x more.
_NUMBER_SHAPES = bytes(48 if 48 <= b <= 57 else b if b == 45 else 113 if b == 34 else 120 for b in range(256))
_TWENTY_DIGITS = b"0" * 20
_MINUS_NINETEEN_DIGITS = b"x-" + b"0" * 19


def _may_hold_a_wide_int(data: bytes) -> bool:
    shapes = data.translate(_NUMBER_SHAPES)
    return _TWENTY_DIGITS in shapes or _MINUS_NINETEEN_DIGITS in shapes


def _sequence_as_list(value: Any) -> Any:
    """orjson's fallback: Squall's tuple values are namedtuples, which orjson does not take."""
    if isinstance(value, tuple):
        return list(value)
    msg = f"Object of type {type(value).__name__} is not JSON serializable"
    raise TypeError(msg)


class JsonCodec:
    """Storm's ``JsonSerializer``: ``<json>\\nend\\n``, UTF-8, one line per message.

    NaN and infinities go out as ``null``, as Storm's json-simple writes them.
    """

    name = "json"

    def encode(self, message: Any) -> bytes:
        try:
            return orjson.dumps(message, default=_sequence_as_list, option=_ORJSON_OPTIONS) + b"end\n"
        except TypeError:
            pass  # an int past 64 bits, a lone surrogate, or something JSON cannot carry
        text = _utf8_encoder(message)
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate cannot be raw UTF-8; JSON's \\u escape can carry it.
            data = _ascii_encoder(message).encode("ascii")
        return data + b"\nend\n"

    def encoder(self) -> Any:
        """``encode`` for one thread (the same function: JSON keeps no state)."""
        return self.encode

    def decoder(self) -> JsonDecoder:
        return JsonDecoder()


class JsonDecoder:
    """Reassembles ``end``-terminated messages across reads and lines.

    The common case is decoded in one ``orjson.loads`` for everything a read
    completed; anything else (CRLF, garbage, numbers orjson would round) goes
    line by line, which also finds the fault.
    """

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""  # from the start of the first incomplete message

    def feed(self, data: bytes) -> list[Any]:
        buf = self._buf + data if self._buf else data
        if b"\r" in buf:
            return self._by_lines(buf)
        end = buf.rfind(b"\nend\n")
        if end < 0:
            if not buf.startswith(b"end\n"):  # (an empty message: the line path reports it)
                self._buf = buf  # no message complete yet
                return []
            return self._by_lines(buf)
        whole = buf[:end]
        # One parse for every message the read completed.  Framing is exact: only a
        # line equal to "end" ends a message, and orjson, like json, reads a message
        # over several lines; an empty message or garbage breaks the array, or its
        # length, and the line path below finds which message it was.
        if not _may_hold_a_wide_int(whole):
            try:
                out = orjson.loads(b"[" + whole.replace(b"\nend\n", b",") + b"]")
            except orjson.JSONDecodeError:
                pass  # NaN, a lone surrogate, bad UTF-8, garbage: the line path decides
            else:
                if len(out) == whole.count(b"\nend\n") + 1:
                    self._buf = buf[end + 5:]
                    return out  # type: ignore[no-any-return]
        return self._by_lines(buf)

    def _by_lines(self, buf: bytes) -> list[Any]:
        out: list[Any] = []
        lines: list[bytes] = []
        find = buf.find
        pos = start = 0
        while True:
            nl = find(b"\n", pos)
            if nl < 0:
                break
            line = buf[pos:nl]
            pos = nl + 1
            if line in (_END, _END_CR):
                text = lines[0] if len(lines) == 1 else b"\n".join(lines)
                lines.clear()
                start = pos
                if not text.strip():
                    self._buf = buf[pos:]
                    raise ProtocolError("empty message before 'end'", out)
                try:
                    out.append(json.loads(text))
                except (ValueError, UnicodeDecodeError) as e:
                    self._buf = buf[pos:]
                    shown = text[:200].decode("utf-8", "replace")
                    msg = f"invalid JSON from the child ({e}): {shown!r}"
                    raise ProtocolError(msg, out) from e
            else:
                lines.append(line)
        self._buf = buf[start:]
        return out


# -- msgpack -----------------------------------------------------------------

class MsgpackCodec:
    """pystorm's msgpack mode: raw concatenated msgpack, no ``end`` lines."""

    name = "msgpack"

    def encode(self, message: Any) -> bytes:
        return msgpack.packb(message, use_bin_type=True)

    def encoder(self) -> Any:
        """A faster ``encode`` for one thread (it reuses its packer)."""
        return msgpack.Packer(use_bin_type=True).pack

    def decoder(self) -> MsgpackDecoder:
        return MsgpackDecoder()


class MsgpackDecoder:
    __slots__ = ("_unpacker",)

    def __init__(self) -> None:
        self._unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, use_list=True)

    def feed(self, data: bytes) -> list[Any]:
        unpacker = self._unpacker
        unpacker.feed(data)
        out: list[Any] = []
        try:
            out.extend(unpacker)
        except Exception as e:
            msg = f"invalid msgpack from the child ({type(e).__name__}: {e})"
            raise ProtocolError(msg, out) from e
        return out


_CODECS: dict[str, type[JsonCodec | MsgpackCodec]] = {
    "json": JsonCodec,
    JSON_SERIALIZER: JsonCodec,
    "msgpack": MsgpackCodec,
    MSGPACK_SERIALIZER: MsgpackCodec,
}


def codec_for(serializer: str | None) -> JsonCodec | MsgpackCodec:
    """The codec for a ``topology.multilang.serializer`` value (Storm's class names or short names)."""
    if serializer is None:
        return JsonCodec()
    cls = _CODECS.get(serializer)
    if cls is None:
        known = ", ".join(sorted(_CODECS))
        msg = f"unknown topology.multilang.serializer {serializer!r} (known: {known})"
        raise ValueError(msg)
    return cls()
