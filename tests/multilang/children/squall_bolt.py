"""The kitchen-sink test bolt (kitchen.py) on Squall's own adapter (squall.multilang.child).

Same commands as pystorm_bolt.py; the serializer comes from the parent
(``SQUALL_MULTILANG_SERIALIZER``).
"""

from kitchen import KitchenBolt

from squall.multilang.child import Bolt


class Kitchen(KitchenBolt, Bolt):
    def flush_sent(self):
        self.pipe.flush()

    def protocol_fd(self):
        return self.pipe.out_fd

    def topology_name_of(self):
        return self.conf.get("topology.name")


if __name__ == "__main__":
    Kitchen().run()
