"""The same split bolt on pystorm (what streamparse runs), unmodified:
``ShellBolt.spec(command=sys.executable, script="splitsentence_pystorm.py", ...)``."""

from pystorm import Bolt


class SplitSentence(Bolt):
    def process(self, tup):
        for word in tup.values.sentence.split():
            self.emit([word])


if __name__ == "__main__":
    SplitSentence().run()
