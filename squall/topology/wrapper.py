"""The base of a bolt that runs another component inside itself.

Features rewrite a topology so that each user bolt (or transactional spout) runs
inside a bolt of theirs: squall.state's CheckpointedBolt, squall.drpc's
RequestCoordinatedBolt, squall.transactional's BatchCoordinatedBolt and
EmitterBolt.  Such a wrapper knows when a tuple is done (a checkpoint committed, a
request or batch complete), so it acks, anchors and fails, never the executor;
the class it wraps is named in its options (``bolt`` or ``spout``, its own options
under ``bolt_options``/``spout_options``) and checked at submit.
"""

from __future__ import annotations

from typing import Any

from squall.topology.component import Bolt
from squall.topology.loading import wrapped_class


class WrapperBolt(Bolt):
    auto_ack = False
    auto_anchor = False
    auto_fail = False

    # The option naming the wrapped class, and what a submit refusing it says.
    wrapped_option = "bolt"
    wrapped_refusal = "is not a Bolt"

    # The wrapped bolt this task runs, once built; None where there is none per
    # task (a transactional batch bolt is made per batch, an emitter wraps a spout).
    user: Any = None

    @classmethod
    def wrapped_kinds(cls) -> type | tuple[type, ...]:
        """The classes the wrapped one may be (a method: a wrapper may import them late)."""
        return Bolt

    @classmethod
    def verify_options(cls, options: dict[str, Any], where: str) -> None:
        wrapped_class(options, cls.wrapped_option, cls.wrapped_kinds(), cls.wrapped_refusal, where)

    def process_tick(self, tup: Any) -> None:
        if self.user is not None:
            self.user.process_tick(tup)

    def cleanup(self) -> None:
        if self.user is not None:
            self.user.cleanup()
