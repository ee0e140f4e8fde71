"""A pystorm (PyPI, unmodified) spout driven by the topology conf (kitchen.py says how).

Usage: ``pystorm_spout.py [json|msgpack]``.
"""

import sys

from kitchen import KitchenSpout
from pystorm import Spout


class Kitchen(KitchenSpout, Spout):
    def flush_sent(self):
        sys.__stdout__.flush()


if __name__ == "__main__":
    Kitchen(serializer=sys.argv[1] if len(sys.argv) > 1 else "json").run()
