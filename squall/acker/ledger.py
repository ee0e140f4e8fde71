"""The acker's XOR ledger, a pure core: events in, completions out.

One int per pending tuple tree packs everything Storm keeps (~20 bytes in
Java): the low 64 bits are the ack val (XOR of every edge id created or
acked in the tree), bit 64 marks a failed tree, and the bits above hold the
spout task + 1 (0 = the spout's init has not arrived yet; bolts' acks may
overtake it).  XOR-ing a 64-bit partial checksum into the packed int leaves
the high bits untouched, so an ack is one dict update.
"""

from __future__ import annotations

from squall.acker.rotating_map import RotatingMap

MASK64 = (1 << 64) - 1
FAILED_BIT = 1 << 64
TASK_SHIFT = 65

# Outcomes returned to the shell: (spout task, root id, ok?)
Outcome = tuple[int, int, bool]


class AckLedger:
    def __init__(self, buckets: int = 3) -> None:
        self.pending = RotatingMap(buckets)

    def __len__(self) -> int:
        return len(self.pending)

    def init(self, root: int, val: int, spout_task: int) -> Outcome | None:
        """The spout emitted tree ``root``: ``val`` is the XOR of its edge ids."""
        entry = self.pending.pop(root, 0) ^ val | ((spout_task + 1) << TASK_SHIFT)
        return self._settle(root, entry)

    def ack(self, root: int, val: int) -> Outcome | None:
        """A bolt acked: ``val`` = its tuple's edge id XOR its children's edge ids."""
        entry = self.pending.pop(root, 0) ^ val
        return self._settle(root, entry)

    def fail(self, root: int) -> Outcome | None:
        entry = self.pending.pop(root, 0) | FAILED_BIT
        return self._settle(root, entry)

    def _settle(self, root: int, entry: int) -> Outcome | None:
        task = (entry >> TASK_SHIFT) - 1
        if task >= 0:
            if entry & FAILED_BIT:
                return (task, root, False)
            if not entry & MASK64:
                return (task, root, True)
        self.pending.put(root, entry)
        return None

    def rotate(self) -> list[Outcome]:
        """Advance timeouts; trees in the expired bucket fail back to their spout."""
        expired = self.pending.rotate()
        return [
            ((entry >> TASK_SHIFT) - 1, root, False)
            for root, entry in expired.items()
            if entry >> TASK_SHIFT
        ]
