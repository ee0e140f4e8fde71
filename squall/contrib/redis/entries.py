"""What every Redis Streams spout does with an entry it cannot turn into a tuple.

An entry is *malformed* when its field names or values are not UTF-8 (with
``decode`` on, the default) or when the spout's ``scheme`` raises on it.  All
three spouts (:class:`~squall.contrib.redis.stream_spout.RedisStreamSpout`,
:class:`~squall.contrib.redis.transactional.RedisStreamPartitionedSpout`,
:class:`~squall.contrib.redis.transactional.RedisStreamOpaqueSpout`) then

* skip it: it is never emitted (the at-least-once spout acks it; a
  transactional batch leaves it out, the same way in every replay, since
  decoding and the scheme are deterministic);
* count it in the task's ``redis.malformed`` metric;
* report it as a component error naming the stream and the entry id (the
  worker logs it; Storm's ``topology.max.error.report.per.interval`` throttle
  applies), once per spout task: a transactional replay does not report it again;
* copy it, if the spec names a ``dead_letter`` stream, to that stream: its
  fields as they were (bytes), plus ``squall.stream``, ``squall.id`` and
  ``squall.error``.  Once per spout task too; a task restarted in the middle of
  a replay may copy an entry again, which ``squall.stream`` and ``squall.id``
  tell apart.

Nothing is turned into U+FFFD replacement text: a spout emits what the entry
holds or nothing.  ``decode=False`` hands the scheme (or the default tuple)
the fields as bytes, for binary payloads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from squall.errors import SquallError


class MalformedEntry(SquallError):
    """A stream entry the spout could not turn into a tuple: not UTF-8, or its scheme raised."""


def decode_fields(fields: Mapping[Any, Any]) -> dict[str, str]:
    """Field names and values as text; a UnicodeDecodeError for any that is not UTF-8."""
    return {_text(k): _text(v) for k, v in fields.items()}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def dead_letter(fields: Mapping[Any, Any], stream: str, entry_id: str,
                error: BaseException) -> dict[Any, Any]:
    """What goes to the dead-letter stream for a malformed entry."""
    letter = dict(fields)
    letter.update({"squall.stream": stream, "squall.id": entry_id, "squall.error": repr(error)})
    return letter


def malformed(what: str, stream: str, entry_id: str, error: BaseException, dead_letter_stream: str | None,
              skipped: str = "") -> MalformedEntry:
    """The error reported for one malformed entry; ``skipped``: where it was left out."""
    where = f" (copied to dead-letter stream {dead_letter_stream!r})" if dead_letter_stream else ""
    msg = f"{what}: malformed entry {entry_id} of stream {stream!r}{skipped}{where}: {error!r}"
    return MalformedEntry(msg)
