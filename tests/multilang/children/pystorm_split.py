"""Storm's split-sentence bolt on pystorm (PyPI, unmodified): ``pystorm_split.py [json|msgpack]``."""

import sys

from pystorm import Bolt


class SplitSentence(Bolt):
    def process(self, tup):
        for word in tup.values.sentence.split():
            self.emit([word])


if __name__ == "__main__":
    SplitSentence(serializer=sys.argv[1] if len(sys.argv) > 1 else "json").run()
