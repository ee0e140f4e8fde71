"""Checkers of word-count histories: a history and the final counts in, a verdict out.

The workload's operations (see :mod:`tests.partitions.history`):

* ``f="emit"``, value ``{"id": message id, "words": [word, ...]}``: a spout
  message.  ``ok`` when the topology acked it (at least once) or committed it
  (exactly once), ``fail`` when it certainly did not take effect (a failed
  transaction, rolled back), ``info`` or no completion when the client cannot
  tell.  A replay of a message is another ``emit`` of the same id.
* ``f="read"``, value ``{"key": word}``, completed ``ok`` with
  ``{"key": word, "count": n}``: a DRPC query of a count during the run.

Definitions (each finding names its kind, the word, and the operations
that show it):

at least once
    *lost*: a word counted fewer times than it occurs in the acked messages
    (distinct ids: a message acked twice is one message).  *phantom*: a word
    counted that no emitted message holds.  *duplicated* counts (above the
    acked occurrences) are reported, and allowed.

exactly once
    Each message id counts once, whatever its replays.  ``ok`` ids certainly
    happened, ``fail`` ids certainly did not, the rest may have (Jepsen's
    ``info``): a word's final count must lie between its occurrences in the
    ``ok`` messages and those plus its occurrences in the undetermined ones.
    Below is *lost*, above is *duplicated* (a failed message's words
    counted are duplicates as well: counted though rolled back), and a word
    no message holds is *phantom*.

reads
    Counts only grow.  A read of ``w`` invoked at index ``i`` and completed
    at ``j`` must return at least ``w``'s occurrences in the messages whose
    ``ok`` came before ``i`` (committed before it was asked), and at most its
    occurrences in the messages invoked before ``j`` and not failed
    (committed, at the latest, by its answer).  A read below is *stale*, a
    read above is *future*.  And of two reads of one word, the one invoked
    after the other completed may not return less: *regressed*.  Order is
    the history's (the recorder's), never a node's clock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.partitions.history import FAIL, OK, Op, Pair, pairs

EXCERPT = 8  # operations quoted per finding: enough to see the pattern, short enough to read


@dataclass(frozen=True)
class Finding:
    kind: str
    key: str
    detail: str
    excerpt: tuple[Any, ...] = ()  # the history's operations (or the audit's terms and writes) that show it


@dataclass(frozen=True)
class Verdict:
    valid: bool
    findings: tuple[Finding, ...]
    stats: Mapping[str, Any] = field(default_factory=dict)

    def of(self, kind: str) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]


def _messages(ops: Iterable[Op]) -> dict[Any, list[Pair]]:
    """Message id -> every emit of it (its replays), in order."""
    out: dict[Any, list[Pair]] = {}
    for pair in pairs(ops):
        if pair.invoke.f == "emit":
            value = pair.invoke.value
            if not isinstance(value, dict) or "id" not in value or not isinstance(value.get("words"), list):
                msg = f"emit at index {pair.invoke.index} has no {{'id', 'words': [...]}} value: {value!r}"
                raise ValueError(msg)
            out.setdefault(value["id"], []).append(pair)
    return out


def _words(emits: list[Pair]) -> Counter[str]:
    return Counter(emits[0].invoke.value["words"])


def _excerpt(emits: Iterable[list[Pair]], word: str) -> tuple[Op, ...]:
    ops: list[Op] = []
    for attempts in emits:
        if word in attempts[0].invoke.value["words"]:
            for pair in attempts:
                ops += [pair.invoke] + ([pair.completion] if pair.completion else [])
        if len(ops) >= EXCERPT:
            break
    return tuple(sorted(ops, key=lambda op: op.index)[:EXCERPT])


def at_least_once(ops: Iterable[Op], counts: Mapping[str, int]) -> Verdict:
    """Every acked message's words counted; nothing counted that was never emitted."""
    messages = _messages(ops)
    acked = {i: e for i, e in messages.items() if any(p.type == OK for p in e)}
    required: Counter[str] = Counter()
    for emits in acked.values():
        required += _words(emits)
    emitted = {w for emits in messages.values() for w in emits[0].invoke.value["words"]}
    findings = []
    for word, need in sorted(required.items()):
        got = counts.get(word, 0)
        if got < need:
            findings.append(Finding("lost", word, f"counted {got}, acked {need}",
                                    _excerpt(acked.values(), word)))
    duplicated = {w: counts.get(w, 0) - n for w, n in required.items() if counts.get(w, 0) > n}
    for word in sorted(set(counts) - emitted):
        findings.append(Finding("phantom", word, f"counted {counts[word]}, never emitted"))
    stats = {"messages": len(messages), "acked": len(acked), "duplicated": sum(duplicated.values())}
    return Verdict(not findings, tuple(findings), stats)


def exactly_once(ops: Iterable[Op], counts: Mapping[str, int]) -> Verdict:
    """Each word counted once per committed message: none lost, none twice."""
    messages = _messages(ops)
    certain: Counter[str] = Counter()
    maybe: Counter[str] = Counter()
    failed_only = set()
    for mid, emits in messages.items():
        outcomes = {p.type for p in emits}
        if OK in outcomes:
            certain += _words(emits)
        elif outcomes == {FAIL}:
            failed_only.add(mid)
        else:
            maybe += _words(emits)
    emitted = {w for emits in messages.values() for w in emits[0].invoke.value["words"]}
    findings = []
    for word in sorted(set(certain) | set(maybe) | set(counts)):
        got, low, high = counts.get(word, 0), certain[word], certain[word] + maybe[word]
        related = _excerpt(messages.values(), word)
        if word not in emitted:
            findings.append(Finding("phantom", word, f"counted {got}, never emitted"))
        elif got < low:
            findings.append(Finding("lost", word, f"counted {got}, committed {low}", related))
        elif got > high:
            findings.append(Finding("duplicated", word, f"counted {got}, at most {high} committed "
                                    f"({low} certainly, {high - low} maybe)", related))
    stats = {"messages": len(messages), "failed": len(failed_only),
             "undetermined": sum(1 for e in messages.values() if not {p.type for p in e} & {OK, FAIL})}
    return Verdict(not findings, tuple(findings), stats)


def reads(ops: Iterable[Op]) -> Verdict:
    """Each DRPC read within what was committed around it; no read below an earlier one."""
    ops = list(ops)
    by_id: dict[Any, list[Pair]] = {}
    for pair in pairs(ops):
        if pair.invoke.f == "emit":
            by_id.setdefault(pair.invoke.value["id"], []).append(pair)
    answered = [(p.invoke, p.completion) for p in pairs(ops)
                if p.invoke.f == "read" and p.completion is not None and p.completion.type == OK]
    findings = []
    done: dict[str, list[tuple[Op, Op]]] = {}  # word -> its reads answered so far
    for invoked, answer in sorted(answered, key=lambda r: r[1].index):
        word, got = invoked.value["key"], answer.value["count"]
        low = high = 0
        for attempts in by_id.values():
            n = attempts[0].invoke.value["words"].count(word)
            if n and any(p.type == OK and p.end < invoked.index for p in attempts):
                low += n
            if n and any(p.invoke.index < answer.index and p.type != FAIL for p in attempts):
                high += n
        if got < low:
            findings.append(Finding("stale", word, f"read {got}, {low} committed before it was asked",
                                    (invoked, answer)))
        elif got > high:
            findings.append(Finding("future", word, f"read {got}, at most {high} committed by its answer",
                                    (invoked, answer)))
        earlier = [r for r in done.get(word, []) if r[1].index < invoked.index]
        if earlier:
            most = max(earlier, key=lambda r: r[1].value["count"])
            if got < most[1].value["count"]:
                detail = f"read {got} after a read of {most[1].value['count']} had been answered"
                findings.append(Finding("regressed", word, detail, (*most, invoked, answer)))
        done.setdefault(word, []).append((invoked, answer))
    return Verdict(not findings, tuple(findings), {"reads": len(answered)})
