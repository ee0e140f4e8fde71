"""The quickstart's word count: a spout of animal names, counted by name."""

from bolts.wordcount import WordCountBolt
from spouts.words import WordSpout
from streamparse import Grouping, Topology


class WordCount(Topology):
    word_spout = WordSpout.spec()
    count_bolt = WordCountBolt.spec(inputs={word_spout: Grouping.fields("word")}, par=2)
