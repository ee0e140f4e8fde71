"""The kitchen-sink test spout (kitchen.py) on Squall's own adapter (squall.multilang.child).

The serializer comes from the parent.
"""

from kitchen import KitchenSpout

from squall.multilang.child import Spout


class Kitchen(KitchenSpout, Spout):
    def flush_sent(self):
        self.pipe.flush()


if __name__ == "__main__":
    Kitchen().run()
