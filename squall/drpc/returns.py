"""ReturnResults: a topology's answers, back to the DRPC servers whose clients wait (Storm's).

It reads ``[result, return_info]`` by position (whatever the fields are called) and
gives the server the return info names ``str(result)``.  An answer that cannot be
delivered fails its tuple, so the spout fails the request (Storm retries three times
first, and so does this: squall.drpc.invocations).
"""

from __future__ import annotations

from typing import Any

from squall.drpc.invocations import DRPCInvocations
from squall.errors import DRPCExecutionError, FailedException
from squall.topology.component import Bolt


class ReturnResults(Bolt):
    outputs: Any = []

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.invocations = DRPCInvocations.for_results(conf, context)

    def process(self, tup: Any) -> None:
        values = tup.values
        if len(values) < 2:
            msg = (f"ReturnResults reads [result, return_info] by position; a tuple of {tup.component!r} "
                   f"on stream {tup.stream!r} has {len(values)} value(s)")
            raise ValueError(msg)
        result, info = values[0], values[1]
        try:
            self.invocations.result(info, result if isinstance(result, str) else str(result))
        except ValueError as e:  # not a return info: a bug upstream, shown, and the tuple fails
            raise ValueError(f"ReturnResults: {e}") from e
        except DRPCExecutionError as e:
            self.logger.warning("a DRPC result was not delivered", error=str(e))
            raise FailedException(str(e)) from e

    def cleanup(self) -> None:
        self.invocations.close()
