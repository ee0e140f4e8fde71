"""Barrier alignment for one bolt task, as a pure core (no I/O).

Storm's checkpoint forwarder waits for a checkpoint from every input before
acting on it, but meanwhile keeps processing tuples from inputs that already
delivered it: those tuples belong *after* the checkpoint, yet land in the
state saved with it, and are counted again when they replay after a
failure.  Here an input (an upstream task: component and task id) that
delivered barrier ``b`` is held back until every input delivered ``b``: the
asynchronous barrier snapshots of Carbone et al. (2015).

Reset barriers (``initstate``, ``rollback``) work the other way round: the
state goes back to the last commit on their *first* copy, and a tuple from an
input that has not delivered the reset yet was emitted before it, so it is
dropped (failed: a reliable spout replays it, a checkpointed spout rewinds).

Tuples from inputs that send no barriers (a plain spout feeding this bolt
straight away) cannot be aligned; they are processed as they come.

Each call returns instructions for the shell, in the order to carry them out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from squall.state.checkpoint import RESETS

Channel = tuple[str, int]  # (source component, source task)


@dataclass(frozen=True)
class Process:
    item: Any


@dataclass(frozen=True)
class Fail:
    item: Any


@dataclass(frozen=True)
class Reset:
    """Bring the state back to the last commit now (the first copy of a reset barrier)."""


@dataclass(frozen=True)
class Complete:
    """Every input delivered the barrier: act on it, forward it, then ack ``items``."""

    action: str
    txid: int
    barrier: int
    items: list[Any] = field(default_factory=list)
    initialized: bool = True  # False: this task has not been reset since it started


class BarrierAligner:
    """Aligns the barriers of one task's inputs.

    ``channels``: the inputs that send barriers.  ``hold_until_initialized``:
    hold all data until a reset barrier completed (a stateful bolt, whose
    state is not loaded before that); a stateless one processes at once.
    """

    def __init__(self, channels: Iterable[Channel], hold_until_initialized: bool) -> None:
        self.channels = frozenset(channels)
        if not self.channels:
            msg = "a checkpointed bolt needs at least one input that sends barriers"
            raise ValueError(msg)
        self.hold_until_initialized = hold_until_initialized
        self.initialized = False
        self.current: int | None = None  # the barrier being aligned
        self.action = ""
        self.txid = 0
        self.arrived: set[Channel] = set()
        self.barrier_items: list[Any] = []
        self.held: list[tuple[Channel, Any]] = []
        # No barrier being aligned and nothing held back: data goes straight through
        # (the shell's fast path reads this one flag per tuple).
        self.passthrough = not hold_until_initialized

    @property
    def aligning(self) -> bool:
        return self.current is not None

    def _holding(self) -> bool:
        return self.hold_until_initialized and not self.initialized

    def data(self, channel: Channel, item: Any) -> list[Any]:
        if self.current is not None:
            if channel in self.arrived:
                self.held.append((channel, item))  # after the barrier: waits for the others
                return []
            if self.action in RESETS and channel in self.channels:
                return [Fail(item)]  # emitted before the reset: replayed or rewound
        if self._holding():
            self.held.append((channel, item))
            return []
        return [Process(item)]

    def barrier(self, channel: Channel, barrier: int, action: str, txid: int, item: Any) -> list[Any]:
        out: list[Any] = []
        if barrier != self.current:
            if self.current is not None:
                # The coordinator gave up on the barrier being aligned (its tree failed
                # somewhere): its copies here are dead, the tuples it held go on below.
                out.extend(Fail(i) for i in self.barrier_items)
            self.current, self.action, self.txid = barrier, action, txid
            self.arrived = set()
            self.barrier_items = []
            if action in RESETS:
                out.append(Reset())
                keep = []
                for ch, held in self.held:
                    if ch in self.channels:
                        out.append(Fail(held))  # emitted before the reset
                    else:
                        keep.append((ch, held))
                self.held = keep
            elif not self._holding():
                out.extend(Process(held) for _ch, held in self.held)
                self.held = []
        self.arrived.add(channel)
        self.barrier_items.append(item)
        if channel not in self.channels:
            # An input this task did not expect to send barriers: count it anyway, say so.
            self.channels = self.channels | {channel}
        if self.arrived >= self.channels:
            if action in RESETS:
                self.initialized = True
            out.append(Complete(action, txid, barrier, self.barrier_items, self.initialized))
            self.current = None
            self.barrier_items = []
            self.arrived = set()
            if not self._holding():
                out.extend(Process(held) for _ch, held in self.held)
                self.held = []
        self.passthrough = self.current is None and not self._holding()
        return out
