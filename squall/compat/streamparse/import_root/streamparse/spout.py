"""``from streamparse.spout import Spout``: the older spelling (squall.compat.streamparse)."""

from squall.compat.streamparse.spout import JavaSpout, ReliableSpout, ShellSpout, Spout

__all__ = ["JavaSpout", "ReliableSpout", "ShellSpout", "Spout"]
