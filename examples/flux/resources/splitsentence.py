"""The word count's splitter as a multilang child, on Squall's Python adapter
(squall.multilang.child): one word per tuple, anchored to the sentence."""

from squall.multilang.child import Bolt


class SplitSentence(Bolt):
    def process(self, tup):
        for word in tup.values[0].split():
            self.emit([word])


if __name__ == "__main__":
    SplitSentence().run()
