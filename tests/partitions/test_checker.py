"""The checkers see what they must: a 1% loss, a count made twice, a stale read, a
second acting leader -- each with the operations that show it -- and pass a run
that is fine."""

from __future__ import annotations

import random
from collections import Counter

from squall.clock import FakeClock
from tests.partitions import checker
from tests.partitions.history import OK, History, Op
from tests.partitions.leaders import Term, Write, audit

WORDS = ["apple", "banana", "cherry", "date", "elder", "fig", "grape"]


def run(messages: int = 200, outcome: str = OK, seed: int = 7) -> tuple[History, Counter[str]]:
    """``messages`` spout messages of three words each, all ended with ``outcome``, and
    the counts a correct topology makes of them."""
    rng = random.Random(seed)
    history = History(FakeClock(0.0).now)
    counts: Counter[str] = Counter()
    for n in range(messages):
        words = [rng.choice(WORDS) for _ in range(3)]
        invocation = history.invoke(n % 4, "emit", {"id": n, "words": words})
        history.complete(invocation, outcome)
        counts.update(words)
    return history, counts


def test_a_bolt_dropping_one_word_in_a_hundred_is_caught_with_the_acked_messages() -> None:
    history, counts = run()
    assert checker.at_least_once(history.ops, counts).valid
    # Given a bolt that drops every hundredth word it counts (6 of 600)
    dropped = Counter(word for n, word in enumerate(sorted(counts.elements())) if n % 100 == 0)
    verdict = checker.at_least_once(history.ops, counts - dropped)
    # Then each word it dropped is reported lost, with acked messages holding it
    assert not verdict.valid
    assert {f.key: f.detail for f in verdict.of("lost")} == {
        w: f"counted {counts[w] - n}, acked {counts[w]}" for w, n in dropped.items()}
    for finding in verdict.of("lost"):
        emits = [op for op in finding.excerpt if op.type == "invoke"]
        assert emits and all(finding.key in op.value["words"] for op in emits)
        assert any(op.type == OK for op in finding.excerpt)


def test_at_least_once_allows_duplicates_and_refuses_phantoms() -> None:
    history, counts = run()
    verdict = checker.at_least_once(history.ops, counts + Counter({"apple": 3}))
    assert verdict.valid and verdict.stats["duplicated"] == 3
    verdict = checker.at_least_once(history.ops, counts + Counter({"kiwi": 1}))
    assert [(f.kind, f.key) for f in verdict.findings] == [("phantom", "kiwi")]


def test_an_exactly_once_count_made_twice_is_caught() -> None:
    history, counts = run(outcome=OK)
    assert checker.exactly_once(history.ops, counts).valid
    # Given one committed message's words counted a second time (a batch replayed past its txid check)
    again = history.ops[2].value["words"]
    verdict = checker.exactly_once(history.ops, counts + Counter(again))
    assert {f.kind for f in verdict.findings} == {"duplicated"}
    assert {f.key for f in verdict.findings} == set(again)
    finding = verdict.findings[0]
    assert f"counted {counts[finding.key] + again.count(finding.key)}, at most {counts[finding.key]}" \
        in finding.detail
    assert all(finding.key in op.value["words"] for op in finding.excerpt if op.type == "invoke")
    # And a lost one too
    assert {f.kind for f in checker.exactly_once(history.ops, counts - Counter(again)).findings} == {"lost"}


def test_exactly_once_takes_undetermined_messages_as_maybe_and_failed_ones_as_never() -> None:
    history = History(FakeClock(0.0).now)
    for mid, outcome in ((1, "ok"), (2, "info"), (3, "fail"), (4, None)):
        invocation = history.invoke(mid, "emit", {"id": mid, "words": ["w"]})
        if outcome:
            history.complete(invocation, outcome)
    ops = history.ops
    # 1 certainly, 2 and 4 maybe, 3 never
    assert [checker.exactly_once(ops, {"w": n}).valid for n in range(5)] == [False, True, True, True, False]
    # A message replayed and committed twice still counts once
    replay = history.invoke(9, "emit", {"id": 1, "words": ["w"]})
    history.ok(replay)
    assert checker.exactly_once(history.ops, {"w": 1}).valid
    assert checker.exactly_once(history.ops, {"w": 4}).of("duplicated")


def test_reads_lie_between_what_was_committed_before_and_by_their_answer() -> None:
    history = History(FakeClock(0.0).now)

    def emit(mid: int) -> Op:
        return history.ok(history.invoke("spout", "emit", {"id": mid, "words": ["w"]}))

    def read(count: int) -> None:
        history.ok(history.invoke("reader", "read", {"key": "w"}), {"key": "w", "count": count})

    emit(1)
    emit(2)
    read(2)
    in_flight = history.invoke("spout", "emit", {"id": 3, "words": ["w"]})
    read(3)  # the third may be committed already
    history.ok(in_flight)
    read(1)  # stale: three committed before it was asked, and below the read of 3
    read(4)  # future: only three emitted
    verdict = checker.reads(history.ops)
    assert [(f.kind, f.detail) for f in verdict.findings] == [
        ("stale", "read 1, 3 committed before it was asked"),
        ("regressed", "read 1 after a read of 3 had been answered"),
        ("future", "read 4, at most 3 committed by its answer"),
    ]
    assert all(op.f == "read" for op in verdict.findings[0].excerpt)


def test_the_leader_audit_passes_handovers_and_catches_a_second_acting_leader() -> None:
    terms = [Term("nimbus-a", 3, start=0.0, end=10.0), Term("nimbus-b", 4, start=12.0)]
    fine = [Write("nimbus-a", 3, 5.0, "words v1", order=100),
            Write("nimbus-b", 4, 13.0, "words v2", order=200)]
    assert audit(terms, fine).valid
    # Given the leader check switched off: nimbus-a, partitioned, believes it leads until 20
    # and writes at 15, after nimbus-b began (ZooKeeper took it after nimbus-b's write)
    believed = [Term("nimbus-a", 3, start=0.0, end=20.0), Term("nimbus-b", 4, start=12.0)]
    stale = Write("nimbus-a", 3, 15.0, "words v2", order=300)
    verdict = audit(believed, [*fine, stale])
    assert not verdict.valid
    assert [(f.kind, f.key) for f in verdict.findings] == [
        ("deposed-write", "nimbus-a"), ("token-regressed", "nimbus-a"), ("overlap", "nimbus-a/nimbus-b")]
    deposed = verdict.of("deposed-write")[0]
    assert "while nimbus-b's term 4 had begun at 12.0" in deposed.detail and stale in deposed.excerpt
    overlap = verdict.of("overlap")[0]
    assert "nimbus-a (term 3) acted until 15.0, nimbus-b (term 4) from 12.0" in overlap.detail
    # A write under a token its writer never held is named too
    forged = audit(terms, [Write("nimbus-b", 3, 5.0, "words v1")])
    assert [(f.kind, f.detail) for f in forged.findings] == [
        ("unknown-term", "words v1 under token 3, which no term of nimbus-b holds")]
