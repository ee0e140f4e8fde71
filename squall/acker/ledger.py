"""The acker's XOR ledger, a pure core: events in, completions out.

One int per pending tuple tree packs everything Storm keeps (~20 bytes in
Java): the low 64 bits are the ack val (XOR of every edge id created or
acked in the tree), bit 64 marks a failed tree, and the bits above hold the
spout task + 1 (0 = the spout's init has not arrived yet; bolts' acks may
overtake it).  XOR-ing a 64-bit partial checksum into the packed int leaves
the high bits untouched, so an ack is one dict update.
"""

from __future__ import annotations

import struct

from squall.acker.rotating_map import RotatingMap

MASK64 = (1 << 64) - 1
FAILED_BIT = 1 << 64
TASK_SHIFT = 65
# A bolt's acks as they travel to an acker: (root, value) pairs, each two unsigned 64-bit
# integers, little-endian, back to back.  Packed once by the bolt (its AckTable), read
# once by the ledger: no tuple or int is made for a pair, in this worker or across.
PACKED_ACK = struct.Struct("<QQ")


def pack_acks(pairs: list[tuple[int, int]]) -> bytes:
    return b"".join(PACKED_ACK.pack(root, val) for root, val in pairs)


# Outcomes returned to the shell: (spout task, root id, ok?)
Outcome = tuple[int, int, bool]


class AckLedger:
    def __init__(self, buckets: int = 3) -> None:
        self.pending = RotatingMap(buckets)

    def __len__(self) -> int:
        return len(self.pending)

    def init(self, root: int, val: int, spout_task: int) -> Outcome | None:
        """The spout emitted tree ``root``: ``val`` is the XOR of its edge ids."""
        return _single(self.init_many([(root, val, spout_task)]))

    def ack(self, root: int, val: int) -> Outcome | None:
        """A bolt acked: ``val`` = its tuple's edge id XOR its children's edge ids."""
        return _single(self.ack_many([(root, val)]))

    def fail(self, root: int) -> Outcome | None:
        return _single(self.fail_many([root]))

    def init_many(self, items: list[tuple[int, int, int]]) -> list[Outcome]:
        """``init`` for each (root, val, spout task); the outcomes, in order."""
        # A root is initialised once (spouts draw a fresh random root per emit), so
        # its task bits are still zero here and XOR-ing them in is setting them.
        return self.ack_many([(root, val | ((task + 1) << TASK_SHIFT)) for root, val, task in items])

    def fail_many(self, roots: list[int]) -> list[Outcome]:
        return self.ack_many([(root, FAILED_BIT) for root in roots], failing=True)

    def ack_many(self, items: list[tuple[int, int]] | bytes, failing: bool = False) -> list[Outcome]:
        """XOR each (root, term) into its tree; the trees that completed or failed.
        ``items`` are pairs, or the bytes :data:`PACKED_ACK` packs them into.

        The acker's hot loop: the RotatingMap's pop and put are inlined, as
        a function call per event would cost as much as the event itself.
        """
        if type(items) is bytes:
            if len(items) % PACKED_ACK.size:
                msg = f"packed acks are {PACKED_ACK.size}-byte pairs, not {len(items)} bytes"
                raise ValueError(msg)
            items = PACKED_ACK.iter_unpack(items)
        buckets = self.pending.buckets
        newest = buckets[0]
        older = buckets[1:]
        out: list[Outcome] = []
        for root, term in items:
            entry = newest.pop(root, None)
            if entry is None:
                entry = 0
                for bucket in older:
                    if root in bucket:
                        entry = bucket.pop(root)
                        break
            entry = entry | term if failing else entry ^ term
            task = (entry >> TASK_SHIFT) - 1
            if task >= 0:
                if entry & FAILED_BIT:
                    out.append((task, root, False))
                    continue
                if not entry & MASK64:
                    out.append((task, root, True))
                    continue
            newest[root] = entry  # still pending: its timeout starts over
        return out

    def rotate(self) -> list[Outcome]:
        """Advance timeouts; trees in the expired bucket fail back to their spout."""
        expired = self.pending.rotate()
        return [
            ((entry >> TASK_SHIFT) - 1, root, False)
            for root, entry in expired.items()
            if entry >> TASK_SHIFT
        ]


def _single(outcomes: list[Outcome]) -> Outcome | None:
    return outcomes[0] if outcomes else None


PureAckLedger = AckLedger  # the pure-Python twin, kept as the reference the typed one is tested against

try:  # the same ledger as a C hash table (squall/acker/typed_ledger.pyx), where it was built
    from squall.acker.typed_ledger import AckLedger  # type: ignore[assignment]  # noqa: F811
except ImportError:
    pass
