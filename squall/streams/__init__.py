"""Storm 2's Streams API: typed streams of values, operations chained on them, windows,
aggregations and joins by key, and state by key, built into an ordinary topology.

    from squall.streams import StreamBuilder, ValueMapper

    builder = StreamBuilder()
    (builder.new_stream(Sentences, ValueMapper(0))
        .flat_map(str.split)
        .map_to_pair(lambda w: (w, 1))
        .count_by_key()
        .print())
    WordCount = builder.build("WordCount")

:mod:`~squall.streams.stream` is what users chain, :mod:`~squall.streams.layout`
lays the operations into bolts, :mod:`~squall.streams.compile` makes the
topology, :mod:`~squall.streams.processors` (per value),
:mod:`~squall.streams.batching` (aggregations, joins), :mod:`~squall.streams.keyed_state`
and :mod:`~squall.streams.chain`
are what the generated bolts (:mod:`~squall.streams.bolts`) run.  See
docs/streams.md.  This ``Stream`` is not ``squall.Stream`` (a stream
declaration): where both are needed, ``from squall import streams``.
"""

from squall.lazy import lazy_exports

_EXPORTS = {
    "StreamBuilder": "squall.streams.builder",
    "Stream": "squall.streams.stream",
    "PairStream": "squall.streams.stream",
    "StreamState": "squall.streams.stream",
    "ValueMapper": "squall.streams.functions",
    "ValuesMapper": "squall.streams.functions",
    "TupleValueMappers": "squall.streams.functions",
    "PairValueMapper": "squall.streams.functions",
    "SlidingWindows": "squall.streams.functions",
    "TumblingWindows": "squall.streams.functions",
    "CombinerAggregator": "squall.streams.functions",
    "StateUpdater": "squall.streams.functions",
    "Count": "squall.windowing.policy",
    "Duration": "squall.windowing.policy",
}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
__all__ = sorted([*_EXPORTS, "aggregators"])  # aggregators: the submodule of the built-in ones
