"""Multilang: spouts and bolts as child processes in any language, speaking
Storm's multilang protocol (JSON, or pystorm's msgpack mode).

    from squall.multilang import ShellBolt, ShellSpout

    class WordCount(Topology):
        sentences = ShellSpout.spec(command=sys.executable, script="sentences.py",
                                    outputs=["sentence"])
        split = ShellBolt.spec(command="node", script="splitsentence.js", outputs=["word"],
                               inputs=[sentences])

Storm's own adapters and pystorm (streamparse) run unchanged as children;
:mod:`squall.multilang.child` is Squall's own Python adapter.
"""

from squall.lazy import lazy_exports

_EXPORTS = {
    "JSON_SERIALIZER": "squall.multilang.codec",
    "MSGPACK_SERIALIZER": "squall.multilang.codec",
    "ChildDied": "squall.multilang.errors",
    "MultilangError": "squall.multilang.errors",
    "ProtocolError": "squall.multilang.errors",
    "ShellProcessError": "squall.multilang.errors",
    "ShellBolt": "squall.multilang.bolt",
    "ShellSpout": "squall.multilang.spout",
}
# Lazy: a Python child imports squall.multilang.child, which needs none of the parent side.
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
__all__ = sorted(_EXPORTS)
