"""The leader audit: did a nimbus act as leader when it was not?

Input, on one timeline (the recorder's clock, or ZooKeeper's zxids: never a
node's own clock, which the nemesis may skew):

* **terms**: each nimbus's leadership terms as observed -- the term's token
  (its election lock node's sequence number, which only grows from term to
  term: :mod:`squall.cluster.election`), the node, when it began and when it
  ended (None: it lasted to the end of the history).  Nimbus logs
  ``leadership term began/ended`` with the token;
* **writes**: each assignment write that ZooKeeper accepted -- the writer, the
  token it wrote under (the assignment's ``writer`` and ``term``), when, and
  optionally its ``order`` in ZooKeeper (its zxid), which is exact where times
  are only as good as the recorder's observation.

Findings:

*unknown-term*
    a write under a token that no term of its writer holds.
*deposed-write*
    a write made outside its term's window, or after a term with a higher
    token had begun: by a nimbus that was not the leader at that moment.
*token-regressed*
    in ZooKeeper's order (``order``, else time), a write under a lower token
    after one under a higher: an old leader wrote after its successor had.
*overlap*
    two terms whose *acting windows* intersect: a term acts from its
    beginning to its last accepted write (to its beginning, if it wrote
    nothing), so two leaders both acted at once only if the older wrote
    after the newer began.  A term that merely believes it still leads
    while its writes are refused (fenced) does not act.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tests.partitions.checker import Finding, Verdict


@dataclass(frozen=True)
class Term:
    node: str
    token: int
    start: float
    end: float | None = None


@dataclass(frozen=True)
class Write:
    writer: str
    token: int
    time: float
    what: str = ""  # e.g. "assignment words-1 v3"
    order: int | None = None  # ZooKeeper's zxid of the write, when known


def audit(terms: Iterable[Term], writes: Iterable[Write]) -> Verdict:
    terms = sorted(terms, key=lambda t: t.token)
    writes = list(writes)
    tokens = [t.token for t in terms]
    if len(set(tokens)) != len(tokens):
        msg = f"two terms share a token: {sorted(t for t in tokens if tokens.count(t) > 1)}"
        raise ValueError(msg)
    by_token = {t.token: t for t in terms}
    findings: list[Finding] = []
    for write in sorted(writes, key=lambda w: w.time):
        term = by_token.get(write.token)
        if term is None or term.node != write.writer:
            findings.append(Finding("unknown-term", write.writer, f"{write.what} under token {write.token}, "
                                    f"which no term of {write.writer} holds", _quote(write, term)))
            continue
        ended = term.end is not None and write.time > term.end
        newer = [t for t in terms if t.token > write.token and t.start < write.time]
        if write.time < term.start or ended or newer:
            if ended:
                why = f"after its term {term.token} ended at {term.end}"
            elif newer:
                why = f"while {newer[0].node}'s term {newer[0].token} had begun at {newer[0].start}"
            else:
                why = f"before its term {term.token} began at {term.start}"
            findings.append(Finding("deposed-write", write.writer, f"{write.what} at {write.time} {why}",
                                    _quote(write, term, *newer[:1])))
    findings += _regressions(writes)
    findings += _overlaps(terms, writes)
    return Verdict(not findings, tuple(findings), {"terms": len(terms), "writes": len(writes)})


def _regressions(writes: list[Write]) -> list[Finding]:
    found = []
    highest: Write | None = None
    for write in sorted(writes, key=lambda w: (w.order if w.order is not None else w.time, w.time)):
        if highest is not None and write.token < highest.token:
            found.append(Finding("token-regressed", write.writer,
                                 f"{write.what} under token {write.token} after {highest.writer}'s "
                                 f"{highest.what} under token {highest.token}", _quote(highest, None, write)))
        if highest is None or write.token > highest.token:
            highest = write
    return found


def _overlaps(terms: list[Term], writes: list[Write]) -> list[Finding]:
    last: dict[int, float] = {}
    for write in writes:
        last[write.token] = max(last.get(write.token, write.time), write.time)
    windows = [(t, t.start, max(t.start, last.get(t.token, t.start))) for t in terms]
    found = []
    for i, (older, _older_start, older_end) in enumerate(windows):
        for newer, newer_start, _newer_end in windows[i + 1:]:
            if newer.node != older.node and newer_start < older_end:
                found.append(Finding("overlap", f"{older.node}/{newer.node}",
                                     f"{older.node} (term {older.token}) acted until {older_end}, "
                                     f"{newer.node} (term {newer.token}) from {newer_start}", (older, newer)))
    return found


def _quote(*items: Write | Term | None) -> tuple[Any, ...]:
    return tuple(x for x in items if x is not None)
