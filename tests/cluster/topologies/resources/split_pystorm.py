"""Split on pystorm, unmodified: [id, sentence] -> [id, index, word]."""

from pystorm import Bolt


class Split(Bolt):
    def process(self, tup):
        sentence_id, sentence = tup.values
        for i, word in enumerate(sentence.split()):
            self.emit([sentence_id, i, word])


if __name__ == "__main__":
    Split().run()
