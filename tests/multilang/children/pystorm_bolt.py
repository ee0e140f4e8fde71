"""A pystorm (PyPI, unmodified) bolt that does what each input tuple asks (kitchen.py).

Inputs are ``(cmd, arg)``; see ``tests/multilang/children/README.md`` for the
commands every test child understands.  Usage: ``pystorm_bolt.py [json|msgpack]``.
"""

import sys

from kitchen import KitchenBolt
from pystorm import Bolt


class Kitchen(KitchenBolt, Bolt):
    def flush_sent(self):
        sys.__stdout__.flush()

    def protocol_fd(self):
        return 1

    def topology_name_of(self):
        return self.topology_name


if __name__ == "__main__":
    Kitchen(serializer=sys.argv[1] if len(sys.argv) > 1 else "json").run()
