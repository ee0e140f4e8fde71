"""What users subclass for checkpointed state: StatefulBolt and CheckpointedSpout.

    class CountWords(StatefulBolt):
        outputs = ["word", "count"]
        def init_state(self, state):        # a KeyValueState, as of the last commit
            self.counts = state
        def process(self, tup):
            n = self.counts.get(tup.values.word, 0) + 1
            self.counts.put(tup.values.word, n)
            self.emit([tup.values.word, n])

A topology with either one is rewritten (squall.state.topology) so that a
checkpoint spout drives prepare / commit / rollback through every bolt.
"""

from __future__ import annotations

from typing import Any

from squall.state.topology import build_checkpointed
from squall.topology.component import Bolt, Spout


class StatefulBolt(Bolt):
    """A bolt whose state the framework checkpoints and restores.

    ``init_state(state)`` is called once, before the first tuple, with the
    state as of the last committed checkpoint (empty the first time).  A
    tuple is acked only when the checkpoint after it has committed, so a
    failure replays exactly what the restored state has not seen.
    """

    _checkpointed = True
    _topology_rewrite = staticmethod(build_checkpointed)  # squall.topology.Topology calls it

    def init_state(self, state: Any) -> None:
        raise NotImplementedError

    # Storm's hooks around the phases: flush what the state must contain, say.
    def pre_prepare(self, txid: int) -> None:
        """Called before the state is saved as prepared for ``txid``."""

    def pre_commit(self, txid: int) -> None:
        """Called before prepared ``txid`` becomes the committed state."""

    def pre_rollback(self) -> None:
        """Called before the state goes back to the last commit."""


class CheckpointedSpout(Spout):
    """A spout that can rewind, whose position is committed with the bolts' state.

    ``snapshot()`` returns the current position (JSON: an offset, a dict of
    offsets per partition); ``restore(position)`` makes the next
    ``next_tuple`` calls emit from there (``None``: from the beginning).
    Its tuples need no message ids and its ``ack``/``fail`` are never
    called: a failure rolls every bolt back to the last checkpoint and the
    spout back to the position committed with it, so each tuple's effect on
    the state counts exactly once.  One task (``par=1``) per topology.
    """

    _checkpointed = True
    _topology_rewrite = staticmethod(build_checkpointed)  # squall.topology.Topology calls it

    def snapshot(self) -> Any:
        raise NotImplementedError

    def restore(self, position: Any) -> None:
        raise NotImplementedError
