"""Windowed bolts: Storm's sliding and tumbling windows, by count or time,
in processing time or event time with watermarks.

    from squall.windowing import WindowedBolt, Count, Duration

    class SlidingSum(WindowedBolt):
        outputs = ["sum"]
        def process_window(self, window):
            self.emit([sum(t.values.n for t in window.tuples)])

    sliding = SlidingSum.spec(inputs=[numbers], window=Count(30), slide=Count(10))

:mod:`~squall.windowing.policy` checks what a spec says, the pure
:mod:`~squall.windowing.core` buffers, triggers and evicts, and
:mod:`~squall.windowing.bolt` is the shell that runs it as a bolt.
:class:`~squall.windowing.join_bolt.JoinBolt` (Storm's JoinBolt) is a windowed
bolt joining its input streams by key; :mod:`~squall.windowing.join` is its core.
"""

from squall.lazy import lazy_exports

_EXPORTS = {
    "LATE_TUPLE_FIELD": "squall.windowing.bolt",
    "WindowedBolt": "squall.windowing.bolt",
    "JoinBolt": "squall.windowing.join_bolt",
    "StatefulWindowedBolt": "squall.windowing.stateful",
    "Activation": "squall.windowing.core",
    "WatermarkTracker": "squall.windowing.core",
    "Window": "squall.windowing.core",
    "WindowCore": "squall.windowing.core",
    "Count": "squall.windowing.policy",
    "Duration": "squall.windowing.policy",
    "WindowPolicy": "squall.windowing.policy",
}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
__all__ = sorted(_EXPORTS)
