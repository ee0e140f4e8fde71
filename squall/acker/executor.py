"""The ``__acker`` executor: the ledger's I/O shell.

It receives init/ack/fail batches and ``__tick`` on its control queue,
applies them to :class:`AckLedger`, and sends each spout task the roots that
completed or failed, batched per turn.
"""

from __future__ import annotations

from typing import Any

from squall.acker.ledger import AckLedger
from squall.worker.executor import Executor

BUCKETS = 3


class AckerExecutor(Executor):
    def setup(self) -> None:
        self.ledger = AckLedger(BUCKETS)
        self.acked = 0
        self.failed = 0
        self.results: dict[tuple[str, int], list[int]] = {}

    def on_control(self, kind: str, task: int, payload: Any) -> None:
        ledger = self.ledger
        outcomes = []
        if kind == "ack":
            ack = ledger.ack
            for root, val in payload:
                outcome = ack(root, val)
                if outcome is not None:
                    outcomes.append(outcome)
        elif kind == "init":
            init = ledger.init
            for root, val, spout_task in payload:
                outcome = init(root, val, spout_task)
                if outcome is not None:
                    outcomes.append(outcome)
        elif kind == "fail":
            for root in payload:
                outcome = ledger.fail(root)
                if outcome is not None:
                    outcomes.append(outcome)
        elif kind == "tick":
            outcomes = ledger.rotate()
        else:
            super().on_control(kind, task, payload)
        results = self.results
        for spout_task, root, ok in outcomes:
            key = ("acked" if ok else "failed", spout_task)
            batch = results.get(key)
            if batch is None:
                batch = results[key] = []
            batch.append(root)
            if ok:
                self.acked += 1
            else:
                self.failed += 1

    @property
    def pending(self) -> int:
        return len(self.ledger)

    def flush(self) -> None:
        if self.results:
            for (kind, spout_task), roots in self.results.items():
                self.control_out.append((kind, spout_task, roots))
            self.results = {}
        super().flush()
