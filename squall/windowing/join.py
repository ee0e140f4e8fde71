"""The pure core of :class:`~squall.windowing.join_bolt.JoinBolt`: what a join
says (streams, keys, joins, selected fields), its checks, and the join of one
window's tuples into rows.  No tuples, no I/O: a window is a list of entries
``(stream, values, ref)`` where ``values`` is a mapping or a values record and
``ref`` is whatever the caller wants back with each row (the shell: the tuple,
to anchor to).

A field is a name or a dotted path into dicts (``outer.user_id``).  A key or
field that is not there reads as :data:`MISSING`; a path through something
that is not a mapping is not there either.
"""

from __future__ import annotations

import keyword
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from squall.errors import TopologyValidationError

INNER = "inner"
LEFT = "left"
MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()


class Selector(str, Enum):
    """How a tuple's stream in the join is told: by stream name or by source component."""

    STREAM = "stream"
    SOURCE = "source"


def _fail(message: str) -> None:
    raise TopologyValidationError(message)


@dataclass(frozen=True)
class FieldRef:
    """One selected field: ``stream`` (None: unprefixed), the path, and the
    output name, the selector with ``:`` and ``.`` made ``_``."""

    stream: str | None
    path: tuple[str, ...]
    text: str

    @property
    def output_name(self) -> str:
        return self.text.replace(":", "_").replace(".", "_")


@dataclass(frozen=True)
class JoinStep:
    stream: str  # the stream this step brings in
    key: tuple[str, ...]  # its key path
    prior: str  # the stream already in the row whose key it matches
    kind: str  # INNER or LEFT


def key_path(stream: str, field: Any, where: str) -> tuple[str, ...]:
    """A key as given to the constructor or a join: a name or dotted path, no stream."""
    if not isinstance(field, str) or not field.strip():
        _fail(f"{where}: the key of stream {stream!r} must be a field name, got {field!r}")
    field = field.strip()
    if ":" in field:
        _fail(f"{where}: key {field!r} of stream {stream!r} names a stream; a key is read from "
              f"its own stream ({stream!r}), give the field alone")
    path = tuple(field.split("."))
    if any(not part for part in path):
        _fail(f"{where}: key {field!r} of stream {stream!r} has an empty segment")
    return path


def _stream_name(value: Any, what: str, where: str) -> str:
    if not isinstance(value, str) or not value:
        _fail(f"{where}: {what} must be a stream or component name, got {value!r}")
    return value


class JoinPlan:
    """The join as configured: built by the bolt's chained calls (each checked
    at the call), checked whole by :meth:`check` when placed, carried to the
    worker by :meth:`to_options` / :meth:`from_options`."""

    def __init__(self, selector: Selector, first: str, key: Any, where: str = "JoinBolt") -> None:
        if not isinstance(selector, Selector):
            _fail(f"{where}: the selector must be JoinBolt.Selector.STREAM or .SOURCE, got {selector!r}")
        self.selector = selector
        self.first = _stream_name(first, "the first stream", where)
        # Every stream's key path, in join order: the first stream's from the constructor.
        self.keys: dict[str, tuple[str, ...]] = {self.first: key_path(self.first, key, where)}
        self.steps: list[JoinStep] = []
        self.select_text: str | None = None
        self.output_stream: str | None = None

    @property
    def streams(self) -> list[str]:
        return list(self.keys)

    def add_join(self, stream: Any, field: Any, prior: Any, kind: str, where: str = "JoinBolt") -> None:
        call = f"{where}.{'join' if kind == INNER else 'left_join'}({stream!r}, {field!r}, {prior!r})"
        stream = _stream_name(stream, "the joined stream", call)
        prior = _stream_name(prior, "the prior stream", call)
        if stream in self.keys:
            _fail(f"{call}: stream {stream!r} is already in the join ({', '.join(self.keys)}); "
                  f"a stream joins once")
        if prior not in self.keys:
            _fail(f"{call}: prior stream {prior!r} was not introduced before "
                  f"(in the join so far: {', '.join(self.keys)})")
        path = key_path(stream, field, call)
        self.keys[stream] = path
        self.steps.append(JoinStep(stream, path, prior, kind))

    def set_select(self, text: Any, where: str = "JoinBolt") -> None:
        if not isinstance(text, str):
            _fail(f"{where}.select: give the fields as one string, 'f1, stream:f2, outer.inner', "
                  f"got {text!r}")
        self.select_text = text

    def set_output_stream(self, name: Any, where: str = "JoinBolt") -> None:
        if not isinstance(name, str) or not name:
            _fail(f"{where}.with_output_stream: a stream name is a non-empty string, got {name!r}")
        self.output_stream = name

    # -- placed: the whole join checked -------------------------------------------

    def fields(self, where: str = "JoinBolt") -> list[FieldRef]:
        """The selected fields, parsed and checked (what ``spec()`` refuses)."""
        if self.select_text is None:
            _fail(f"{where}: no select(...): name the output fields, e.g. select('user_id, orders:price')")
        refs: list[FieldRef] = []
        by_name: dict[str, str] = {}
        for raw in self.select_text.split(","):
            text = raw.strip()
            head, colon, tail = text.partition(":")  # the first colon, as Storm's
            stream, field = (head, tail) if colon else (None, text)
            if colon and (not stream or not field):
                _fail(f"{where}: select field {text!r} has an empty stream or field name")
            path = tuple(field.split(".")) if field else ()
            if not path or any(not part for part in path):
                _fail(f"{where}: select field {text!r} is empty or has an empty segment "
                      f"(select {self.select_text!r})")
            if stream is not None and stream not in self.keys:
                _fail(f"{where}: select field {text!r} names stream {stream!r}, which is not in the join "
                      f"({', '.join(self.keys)})")
            ref = FieldRef(stream, path, text)
            name = ref.output_name
            if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
                _fail(f"{where}: select field {text!r} gives the output field {name!r}, which is not an "
                      f"identifier (or is a keyword, or starts with '_')")
            if name in by_name:
                _fail(f"{where}: select fields {by_name[name]!r} and {text!r} both give the output "
                      f"field {name!r}")
            by_name[name] = text
            refs.append(ref)
        return refs

    def check(self, where: str, tasks: int) -> list[FieldRef]:
        """Everything the plan alone shows wrong when it is placed at ``tasks`` tasks."""
        refs = self.fields(where)
        if tasks > 1:
            for stream, path in self.keys.items():
                if len(path) > 1:
                    _fail(f"{where}: key {'.'.join(path)!r} of stream {stream!r} is nested, so no fields "
                          f"grouping can send equal keys to one task; a nested key needs par=1 "
                          f"(got {tasks} tasks)")
        return refs

    def check_inputs(self, where: str, tasks: int,
                     inputs: Iterable[tuple[str, Any, Sequence[str] | None]]) -> None:
        """The inputs against the join: ``(stream id, grouping, declared fields or
        None when unknown)`` per input, its stream id being what the selector
        reads (a stream name or a component name)."""
        provided: dict[str, list[Sequence[str] | None]] = {}
        for sid, grouping, declared in inputs:
            if sid not in self.keys:
                what = "stream" if self.selector is Selector.STREAM else "component"
                _fail(f"{where}: input {what} {sid!r} is not in the join ({', '.join(self.keys)}): "
                      f"join it, or do not subscribe to it")
            provided.setdefault(sid, []).append(declared)
            key = self.keys[sid]
            if tasks > 1 and (grouping.type != "fields" or len(key) > 1
                              or tuple(grouping.fields) != key):
                got = f"fields{tuple(grouping.fields)}" if grouping.type == "fields" else grouping.type
                _fail(f"{where}: at {tasks} tasks each input must be fields-grouped on its key, so equal "
                      f"keys meet in one task: {sid!r} needs Grouping.fields({'.'.join(key)!r}), got {got}")
            if declared is not None and key[0] not in declared:
                _fail(f"{where}: key {'.'.join(key)!r} of {sid!r}: {key[0]!r} is not a field of it "
                      f"(declared: {list(declared)})")
        missing = [s for s in self.keys if s not in provided]
        if missing:
            _fail(f"{where}: {', '.join(map(repr, missing))} in the join but no input provides it "
                  f"(inputs: {', '.join(provided) or 'none'})")
        for ref in self.fields(where):
            streams = [ref.stream] if ref.stream is not None else list(provided)
            known = [d for s in streams for d in provided[s]]
            if known and all(d is not None for d in known) and not any(ref.path[0] in d for d in known):
                of = f"stream {ref.stream!r}" if ref.stream is not None else "any input stream"
                _fail(f"{where}: select field {ref.text!r}: {ref.path[0]!r} is not a field of {of}")

    # -- the plan as plain data ------------------------------------------------------

    def to_options(self) -> dict[str, Any]:
        return {"selector": self.selector.value, "first": self.first,
                "key": ".".join(self.keys[self.first]),
                "joins": [{"stream": s.stream, "field": ".".join(s.key), "prior": s.prior, "kind": s.kind}
                          for s in self.steps],
                "select": self.select_text, "output_stream": self.output_stream}

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> JoinPlan:
        plan = cls(Selector(options["selector"]), options["first"], options["key"])
        for step in options["joins"]:
            plan.add_join(step["stream"], step["field"], step["prior"], step["kind"])
        if options.get("select") is not None:
            plan.set_select(options["select"])
        if options.get("output_stream") is not None:
            plan.set_output_stream(options["output_stream"])
        return plan

    # -- one window ---------------------------------------------------------------------

    def rows(self, window: Iterable[tuple[str, Any, Any]],
             fields: Sequence[FieldRef] | None = None) -> list[tuple[list[Any], list[Any]]]:
        """Join a window's entries ``(stream, values, ref)`` into rows: each row's
        selected values and the refs of the entries it was made of, in join order."""
        if fields is None:
            fields = self.fields()
        firsts: list[tuple[str, Any, Any]] = []
        # The later streams' entries by key, in window order; an entry without a key joins nothing.
        index: dict[str, dict[Any, list[tuple[str, Any, Any]]]] = {s.stream: {} for s in self.steps}
        for entry in window:
            stream = entry[0]
            if stream == self.first:
                firsts.append(entry)
                continue
            by_key = index.get(stream)
            if by_key is None:
                msg = (f"a tuple of {stream!r} reached the join, which has no such stream "
                       f"({', '.join(self.keys)})")
                raise ValueError(msg)
            key = hashable_key(lookup(entry[1], self.keys[stream]))
            if key is not MISSING:
                by_key.setdefault(key, []).append(entry)
        # A row: its entries by stream, in join order (a left join's miss leaves a stream out).
        rows: list[dict[str, tuple[str, Any, Any]]] = [{self.first: e} for e in firsts]
        for step in self.steps:
            by_key = index[step.stream]
            prior_key = self.keys[step.prior]
            joined = []
            for row in rows:
                prior = row.get(step.prior)
                if prior is None:
                    continue  # Storm's too: no key to match on, even in a left join
                key = hashable_key(lookup(prior[1], prior_key))
                if key is MISSING:
                    continue
                matches = by_key.get(key)
                if matches:
                    joined.extend({**row, step.stream: m} for m in matches)
                elif step.kind == LEFT:
                    joined.append(row)
            rows = joined
        return [(project(row, fields), [e[2] for e in row.values()]) for row in rows]


def project(row: Mapping[str, tuple[str, Any, Any]], fields: Sequence[FieldRef]) -> list[Any]:
    out = []
    for ref in fields:
        value = None
        if ref.stream is not None:
            entry = row.get(ref.stream)
            if entry is not None:
                found = lookup(entry[1], ref.path)
                value = None if found is MISSING else found
        else:
            # Unprefixed: the first of the row's entries, in join order, that has it set.
            for entry in row.values():
                found = lookup(entry[1], ref.path)
                if found is not MISSING and found is not None:
                    value = found
                    break
        out.append(value)
    return out


def lookup(values: Any, path: Sequence[str]) -> Any:
    """``values``' field at ``path``, or MISSING.  ``values`` is a mapping or a
    values record (a namedtuple: its ``_fields`` say what it holds, so a
    namedtuple method such as ``count`` is never read as a field)."""
    head = path[0]
    if isinstance(values, Mapping):
        current = values.get(head, MISSING)
    elif head in getattr(values, "_fields", ()):
        current = getattr(values, head)
    else:
        return MISSING
    for part in path[1:]:
        if not isinstance(current, Mapping):
            return MISSING
        current = current.get(part, MISSING)
    return current


def hashable_key(value: Any) -> Any:
    """A key as a dict compares it (``1``, ``1.0`` and ``True`` are one key); None
    and MISSING give MISSING.  Lists, dicts and sets, which a tuple's values may
    hold (and the wire may turn a tuple into a list), are compared by content."""
    if value is None or value is MISSING:
        return MISSING
    try:
        hash(value)
    except TypeError:
        try:
            return _frozen(value)
        except TypeError:
            return MISSING  # holds something that cannot be compared as a key: joins nothing
    return value


def _frozen(value: Any) -> Any:
    if isinstance(value, Mapping):
        return frozenset((_frozen(k), _frozen(v)) for k, v in value.items())
    if isinstance(value, (set, frozenset)):
        return frozenset(_frozen(v) for v in value)
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    hash(value)  # TypeError: not a key
    return value
