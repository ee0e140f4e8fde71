"""Storm's topology statistics from cumulative worker reports: a pure core."""

from __future__ import annotations

import pytest

from squall.metrics.book import StatsBook, window_id


def bolt(executed: int, busy: float, emitted: int, executor: tuple[int, int] = (2, 2)) -> dict:
    return {"component": "count", "executor": list(executor), "executed": executed, "acked": executed,
            "failed": 0, "busy_secs": busy, "emitted": {"default": emitted},
            "transferred": {"default": emitted * 2}, "executed_by": {"split:default": executed}}


def spout(acked: int, complete: float) -> dict:
    return {"component": "words", "executor": [5, 5], "acked": acked, "failed": 1, "complete_secs": complete,
            "emitted": {"default": acked + 1}, "transferred": {"default": acked + 1}}


def test_cumulative_reports_become_window_sums_and_latencies() -> None:
    book = StatsBook()
    book.ingest("wc", "w1", [bolt(100, 0.5, 100), spout(50, 1.0)], now=1000.0)
    book.ingest("wc", "w1", [bolt(300, 1.5, 300), spout(150, 3.0)], now=1010.0)
    comps = book.components("wc", "600", now=1010.0)
    count, words = comps["count"], comps["words"]
    assert (count["executed"], count["acked"], count["emitted"], count["transferred"]) == (300, 300, 300, 600)
    assert count["executeLatency"] == "5.000"  # 1.5 s busy over 300 tuples
    assert count["capacity"] == pytest.approx(0.15)  # busy 1.5 s of the 10 s seen so far
    assert words["completeLatency"] == "20.000"  # 3 s over 150 acked trees
    assert words["failed"] == 1 and words["timedOut"] == 0
    streams = book.executors("wc", "600", 1010.0)[("count", (2, 2))]["streams"]
    assert streams["executed_by"] == {"split:default": 300}


def test_a_spouts_timed_out_trees_are_counted_apart_from_its_failed_ones() -> None:
    # (issue 30: timeouts and a bolt's fails were one number)
    book = StatsBook()
    book.ingest("wc", "w1", [{**spout(10, 1.0), "failed": 5, "timed_out": 2}], now=1000.0)
    book.ingest("wc", "w1", [{**spout(20, 2.0), "failed": 9, "timed_out": 6}], now=1010.0)
    words = book.components("wc", ":all-time", now=1010.0)["words"]
    assert (words["failed"], words["timedOut"]) == (9, 6)


def test_totals_over_the_executors_running_now_match_their_rows() -> None:
    # (issue 30: after a rebalance the component page's totals held the stopped
    # executors' counts, its rows did not: 1,060,406 against 596,918 executed)
    book = StatsBook()
    book.ingest("wc", "w1", [bolt(500, 1.0, 500, executor=(2, 3))], now=1000.0)  # before the rebalance
    book.ingest("wc", "w2", [bolt(70, 0.1, 70, executor=(2, 2)), bolt(30, 0.1, 30, executor=(3, 3))],
                now=1010.0)
    rows = book.executors("wc", "600", 1010.0)
    now_running = [(2, 2), (3, 3)]
    total = book.components("wc", "600", 1010.0, now_running)["count"]["executed"]
    assert total == sum(rows[("count", e)]["executed"] for e in now_running) == 100
    assert book.components("wc", "600", 1010.0)["count"]["executed"] == 600  # everything seen


def test_a_restarted_worker_counts_from_zero_without_losing_what_came_before() -> None:
    book = StatsBook()
    book.ingest("wc", "pid-1", [bolt(100, 1.0, 100)], now=0.0)
    book.ingest("wc", "pid-2", [bolt(30, 0.3, 30)], now=5.0)  # a new process
    assert book.components("wc", ":all-time", 5.0)["count"]["executed"] == 130


def test_old_counts_leave_the_ten_minute_window_but_not_all_time() -> None:
    book = StatsBook()
    book.ingest("wc", "w", [bolt(100, 1.0, 100)], now=0.0)
    book.ingest("wc", "w", [bolt(100, 1.0, 100)], now=700.0)  # nothing new in 11 minutes
    assert book.components("wc", "600", 700.0)["count"]["executed"] == 0
    assert book.components("wc", "10800", 700.0)["count"]["executed"] == 100
    assert book.components("wc", ":all-time", 700.0)["count"]["executed"] == 100


def test_components_sum_their_executors_and_show_the_busiest_capacity() -> None:
    book = StatsBook()
    book.ingest("wc", "w", [bolt(0, 0.0, 0, (2, 2)), bolt(0, 0.0, 0, (3, 3))], now=0.0)
    book.ingest("wc", "w", [bolt(100, 2.0, 100, (2, 2)), bolt(300, 1.0, 300, (3, 3))], now=10.0)
    count = book.components("wc", "600", 10.0)["count"]
    assert count["executed"] == 400 and count["executors"] == 2
    assert count["capacity"] == pytest.approx(0.2)
    assert count["executeLatency"] == "7.500"  # (2 s + 1 s) / 400 tuples


def test_windows_are_storms_and_a_forgotten_topology_leaves_nothing() -> None:
    assert window_id("600") == "600" and window_id(None) == ":all-time" and window_id(86400) == "86400"
    with pytest.raises(ValueError, match="window must be one of"):
        window_id("60")
    book = StatsBook()
    book.ingest("wc", "w", [bolt(1, 0.1, 1)], now=0.0)
    book.forget("wc")
    assert book.sums == {} and book.deltas.last == {} and book.components("wc", "600", 0.0) == {}
