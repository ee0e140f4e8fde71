"""A bolt that logs every tuple at debug (hidden by default) and every tenth at info: what
`squall set_log_level` shows and hides on a running worker (issue 30); it passes each on,
to no one, for `squall debug` to sample (issue 50)."""

from __future__ import annotations

from typing import Any

from squall import Bolt, Spout, Topology

EVERY_SECS = 0.02  # fifty tuples a second: enough lines to see, few enough to read


class Ticks(Spout):
    outputs = ["n"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.n = 0
        self.next_at = 0.0

    def next_tuple(self) -> None:
        now = self.clock.now()
        if now < self.next_at:
            return
        self.next_at = now + EVERY_SECS
        self.n += 1
        self.emit([self.n], tup_id=self.n)


class Chatty(Bolt):
    outputs = ["n"]

    def process(self, tup: Any) -> None:
        n = tup.values[0]
        self.emit([n])
        self.logger.debug("chatty debug", n=n)
        if n % 10 == 0:
            self.logger.info("chatty progress", n=n)


class ChattyTopology(Topology):
    ticks = Ticks.spec()
    chatty = Chatty.spec(inputs=[ticks])
