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

A decoder given ``max_bytes`` (the parent's, from
``topology.multilang.max.message.bytes``) refuses a message longer than
that with :class:`MessageTooLarge` as soon as it has seen that many bytes
of it: it never holds more than the cap plus one read (:data:`CHUNK`).
"""

from __future__ import annotations

import json
from typing import Any, Protocol

import msgpack
import orjson

from squall.multilang.errors import MessageTooLarge, ProtocolError

JSON_SERIALIZER = "org.apache.storm.multilang.JsonSerializer"
MSGPACK_SERIALIZER = "com.yelp.pyleus.serializer.MessagePackSerializer"

MAX_MESSAGE_KEY = "topology.multilang.max.message.bytes"
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
CHUNK = 1 << 20  # the most a reader takes from a child's pipe at once

_END = b"end"
_END_CR = b"end\r"


class Decoder(Protocol):
    def feed(self, data: bytes) -> list[Any]: ...


class Codec(Protocol):
    name: str

    def encode(self, message: Any) -> bytes: ...

    def decoder(self, max_bytes: int | None = None) -> Decoder: ...


def too_large(size: int, cap: int, decoded: list[Any], complete: bool) -> MessageTooLarge:
    so_far = f"{size} bytes" if complete else f"{size} bytes so far, not yet complete"
    msg = f"a message from the child is over the limit of {cap} bytes ({MAX_MESSAGE_KEY}): {so_far}"
    return MessageTooLarge(msg, decoded)


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

    def decoder(self, max_bytes: int | None = None) -> JsonDecoder:
        return JsonDecoder(max_bytes)


class JsonDecoder:
    """Reassembles ``end``-terminated messages across reads and lines.

    The common case is decoded in one ``orjson.loads`` for everything a read
    completed; anything else (CRLF, garbage, numbers orjson would round) goes
    line by line, which also finds the fault.  With ``max_bytes``, a
    message's JSON text (the lines before ``end``) may not be longer.
    """

    __slots__ = ("_buf", "_max")

    def __init__(self, max_bytes: int | None = None) -> None:
        self._buf = b""  # from the start of the first incomplete message
        self._max = max_bytes

    def feed(self, data: bytes) -> list[Any]:
        buf = self._buf + data if self._buf else data
        if b"\r" in buf:
            return self._by_lines(buf)
        end = buf.rfind(b"\nend\n")
        cap = self._max
        if end < 0:
            if not buf.startswith(b"end\n"):  # (an empty message: the line path reports it)
                if cap is not None and len(buf) > cap:
                    self._buf = b""
                    raise too_large(len(buf), cap, [], complete=False)
                self._buf = buf  # no message complete yet
                return []
            return self._by_lines(buf)
        whole = buf[:end]
        if cap is not None and len(whole) > cap:
            return self._by_lines(buf)  # maybe one message is too long: the line path measures each
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
                    rest = buf[end + 5:]
                    if cap is not None and len(rest) > cap:
                        self._buf = b""
                        raise too_large(len(rest), cap, out, complete=False)
                    self._buf = rest
                    return out  # type: ignore[no-any-return]
        return self._by_lines(buf)

    def _by_lines(self, buf: bytes) -> list[Any]:
        out: list[Any] = []
        lines: list[bytes] = []
        find = buf.find
        pos = start = 0
        cap = self._max
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
                if cap is not None and len(text) > cap:
                    self._buf = b""
                    raise too_large(len(text), cap, out, complete=True)
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
        if cap is not None and len(buf) - start > cap:
            self._buf = b""
            raise too_large(len(buf) - start, cap, out, complete=False)
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

    def decoder(self, max_bytes: int | None = None) -> MsgpackDecoder:
        return MsgpackDecoder(max_bytes)


class MsgpackDecoder:
    """Concatenated msgpack values.  With ``max_bytes``, data is taken a
    :data:`CHUNK` at a time and the bytes held for an incomplete value are
    checked after each; each value is measured only when a chunk could have
    completed one over the cap (the common case costs nothing)."""

    __slots__ = ("_fed", "_max", "_unpacker")

    def __init__(self, max_bytes: int | None = None) -> None:
        self._max = max_bytes
        self._fed = 0  # bytes fed so far (the unpacker's tell() counts those consumed)
        if max_bytes is None:  # msgpack's own bound (100 MiB) applies
            self._unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, use_list=True)
        else:
            # Never full before the checks below: at most the cap is held between chunks.
            size = min(max_bytes + CHUNK, 2**31 - 1)
            self._unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, use_list=True,
                                              max_buffer_size=size)

    def feed(self, data: bytes) -> list[Any]:
        out: list[Any] = []
        cap = self._max
        if cap is None:
            self._feed(data, out)
            return out
        view = memoryview(data)
        for i in range(0, len(view), CHUNK):
            self._feed_capped(view[i:i + CHUNK], cap, out)
        return out

    def _feed(self, data: Any, out: list[Any]) -> None:
        unpacker = self._unpacker
        try:
            unpacker.feed(data)
            out.extend(unpacker)
        except msgpack.BufferFull as e:
            held = self._fed - unpacker.tell()
            if self._max is not None:  # (not expected: the buffer has room for the cap and a chunk)
                raise too_large(held, self._max, out, complete=False) from e
            msg = "a message from the child is over msgpack's buffer limit (100 MiB)"
            raise MessageTooLarge(msg, out) from e
        except Exception as e:
            msg = f"invalid msgpack from the child ({type(e).__name__}: {e})"
            raise ProtocolError(msg, out) from e

    def _feed_capped(self, piece: Any, cap: int, out: list[Any]) -> None:
        unpacker = self._unpacker
        held = self._fed - unpacker.tell() + len(piece)
        self._fed += len(piece)
        if held <= cap:
            self._feed(piece, out)  # no value in reach can be over the cap
            return
        try:
            unpacker.feed(piece)
            start = unpacker.tell()
            for value in unpacker:
                end = unpacker.tell()
                if end - start > cap:
                    raise too_large(end - start, cap, out, complete=True)
                out.append(value)
                start = end
        except MessageTooLarge:
            raise
        except Exception as e:
            msg = f"invalid msgpack from the child ({type(e).__name__}: {e})"
            raise ProtocolError(msg, out) from e
        held = self._fed - unpacker.tell()
        if held > cap:
            raise too_large(held, cap, out, complete=False)


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
