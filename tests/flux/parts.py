"""Components the Flux test files name (tests.flux.parts.X)."""

from __future__ import annotations

from typing import Any

from squall import Bolt, Spout, Stream
from squall.state import CheckpointedSpout, StatefulBolt
from squall.topology.grouping import CustomGrouping


class Prefix:
    """A plain object (a Flux component) that bolts get by ref."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.suffix = ""

    def set_suffix(self, suffix: str) -> None:
        self.suffix = suffix

    def wrap(self, word: str) -> str:
        return f"{self.text}{word}{self.suffix}"


class Words(Spout):
    """Emits ``words`` once each (reliably), then nothing."""

    outputs = ["word"]

    def __init__(self, *words: str) -> None:
        super().__init__()
        self.words = list(words)

    def next_tuple(self) -> None:
        if self.words:
            word = self.words.pop(0)
            self.emit([word], tup_id=word)


class TwoStreams(Spout):
    outputs = [Stream(["word"]), Stream(["word", "n"], name="numbered"), Stream(["word"], name="direct",
                                                                               direct=True)]


class Decorate(Bolt):
    """Emits each word wrapped by its prefixes (constructor arg, property, config method)."""

    outputs = ["word"]

    def __init__(self, prefix: Prefix | None = None, repeat: int = 1) -> None:
        super().__init__()
        self.prefix = prefix
        self.repeat = repeat
        self.extra: list[Prefix] = []
        self.upper = False

    @classmethod
    def make(cls, repeat: int) -> Decorate:
        return cls(None, repeat)

    def with_extra(self, prefixes: list[Prefix]) -> None:  # a reflist is one list argument
        self.extra.extend(prefixes)

    def process(self, tup: Any) -> None:
        word = tup.values.word
        for p in [self.prefix, *self.extra]:
            if p is not None:
                word = p.wrap(word)
        if self.upper:
            word = word.upper()
        for _ in range(self.repeat):
            self.emit([word])


class Sink(Bolt):
    outputs = ["word"]

    def process(self, tup: Any) -> None:
        self.emit([tup.values.word])


class FirstTask(CustomGrouping):
    """Sends every tuple to one target task: the ``index``-th."""

    def __init__(self, index: int = 0) -> None:
        super().__init__()
        self.index = index

    def choose_tasks(self, task_id: int, values: Any) -> list[int]:
        return [self.target_tasks[self.index]]


NOT_A_COMPONENT = 42


class Quiet(Bolt):
    """Declares no output stream."""

    def process(self, tup: Any) -> None:
        pass


class Tag(Bolt):
    """Emits each word with its tag (a constructor arg) in front."""

    outputs = ["word"]

    def __init__(self, tag: str) -> None:
        super().__init__()
        self.tag = tag

    def process(self, tup: Any) -> None:
        self.emit([f"{self.tag}{tup.values.word}"])


class ScaledCount(StatefulBolt):
    """Counts each word ``multiplier`` (a constructor arg, scaled by a config
    method) at a time, keyed by ``prefix`` (a property) and the word; emits the
    running total."""

    outputs = ["key", "count"]

    def __init__(self, multiplier: int = 1) -> None:
        super().__init__()
        self.multiplier = multiplier
        self.prefix = ""

    def scale_by(self, factor: int) -> None:
        self.multiplier *= factor

    def init_state(self, state: Any) -> None:
        self.counts = state

    def process(self, tup: Any) -> None:
        key = f"{self.prefix}{tup.values.word}"
        n = self.counts.get(key, 0) + self.multiplier
        self.counts.put(key, n)
        self.emit([key, n])


class RewindingWords(CheckpointedSpout):
    """Emits ``words`` (constructor args) once each, from a position it can rewind to."""

    outputs = ["word"]

    def __init__(self, *words: str) -> None:
        super().__init__()
        self.words = list(words)
        self.pos = 0

    def snapshot(self) -> int:
        return self.pos

    def restore(self, position: Any) -> None:
        self.pos = position or 0

    def next_tuple(self) -> None:
        if self.pos < len(self.words):
            self.emit([self.words[self.pos]])
            self.pos += 1


class ReplayingWords(Spout):
    """Emits ``words`` (constructor args) reliably, each again when it fails (as a
    stateful bolt fails what reaches it before its state is restored)."""

    outputs = ["word"]

    def __init__(self, *words: str) -> None:
        super().__init__()
        self.words = list(words)
        self.todo = list(range(len(words)))

    def next_tuple(self) -> None:
        if self.todo:
            i = self.todo.pop(0)
            self.emit([self.words[i]], tup_id=i)

    def fail(self, tup_id: Any) -> None:
        self.todo.append(tup_id)
