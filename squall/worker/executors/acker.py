"""The ``__acker`` executor: the ledger's I/O shell, an executor of the worker like the
spouts' and bolts' (Storm's acker is a plain bolt).

It receives init/ack/fail batches and ``__tick`` on its control queue,
applies them to :class:`AckLedger`, and sends each spout task the roots that
completed, failed or timed out ("timedout": the ledger's expiry, not a bolt's fail),
batched per turn.
"""

from __future__ import annotations

from typing import Any

from squall.acker.ledger import AckLedger
from squall.worker.executors.executor import Executor

BUCKETS = 3


class AckerExecutor(Executor):
    def setup(self) -> None:
        self.ledger = AckLedger(BUCKETS)
        self.acked = 0
        self.failed = 0
        self.results: dict[tuple[bool, int], list[int]] = {}  # (ok?, spout task) -> roots
        self.expired: dict[int, list[int]] = {}  # spout task -> roots that timed out

    def on_control(self, kind: str, task: int, payload: Any) -> None:
        ledger = self.ledger
        if kind == "ack":
            outcomes = ledger.ack_many(payload)
        elif kind == "init":
            outcomes = ledger.init_many(payload)
        elif kind == "fail":
            outcomes = ledger.fail_many(payload)
        elif kind == "tick":
            # Timed out, not failed by a bolt: told apart, so the spout's stats (and its
            # hint) can say which (Storm users keep asking for it).
            for spout_task, root, _ok in ledger.rotate():
                self.expired.setdefault(spout_task, []).append(root)
                self.failed += 1
            return
        else:
            super().on_control(kind, task, payload)
            return
        results = self.results
        ok_count = 0
        for spout_task, root, ok in outcomes:
            key = (ok, spout_task)
            batch = results.get(key)
            if batch is None:
                batch = results[key] = []
            batch.append(root)
            ok_count += ok
        self.acked += ok_count
        self.failed += len(outcomes) - ok_count

    def stats_snapshot(self) -> dict[str, Any]:
        out = super().stats_snapshot()
        out.update(acked=self.acked, failed=self.failed, pending=len(self.ledger))
        return out

    @property
    def pending(self) -> int:
        return len(self.ledger)

    def flush(self) -> None:
        if self.results:
            for (ok, spout_task), roots in self.results.items():
                self.control_out.append(("acked" if ok else "failed", spout_task, roots))
            self.results = {}
        if self.expired:
            for spout_task, roots in self.expired.items():
                self.control_out.append(("timedout", spout_task, roots))
            self.expired = {}
        super().flush()
