"""A streamparse project's code, unchanged, run by Squall in-process.

Each test writes a small project as a streamparse user writes one (``from
streamparse import ...``), loads its topology file the way ``squall local``
does (squall.cli.args.load_topology, which gives it ``streamparse``) and runs
it in local mode, with time from a FakeClock where ticks matter.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from squall import FakeClock, LocalCluster, TopologyValidationError
from squall.cli.args import load_topology
from squall.testing import poll_for
from tests.helpers import stay

pytestmark = pytest.mark.timeout(60)
REPO = Path(__file__).resolve().parents[2]

WORDS = '''
from itertools import cycle

from streamparse import Spout


class WordSpout(Spout):
    outputs = ["word"]

    def initialize(self, stormconf, context):
        self.words = cycle(["dog", "cat", "zebra", "elephant"])

    def next_tuple(self):
        self.emit([next(self.words)])
'''

COUNTER = '''
import os
from collections import Counter

from streamparse import Bolt

SEEN = []  # what initialize saw, per task: the test reads it


class WordCountBolt(Bolt):
    outputs = ["word", "count"]

    def initialize(self, conf, ctx):
        self.counter = Counter()
        self.pid = os.getpid()
        self.total = 0
        SEEN.append({"topology": self.topology_name, "component": self.component_name, "task": self.task_id,
                     "name": conf["topology.name"], "taskid": ctx["taskid"],
                     "sources": ctx["source->stream->fields"], "logger": self.logger.name,
                     "storm_conf": self.storm_conf is conf, "logging": type(self.logger).__module__})

    def process(self, tup):
        word = tup.values[0]
        assert tup.values.word == word and tup.component == "word_spout" and tup.stream == "default"
        self.counter[word] += 1
        self.total += 1
        if self.total % 1000 == 0:
            self.logger.info("counted [%d] words [pid=%d]", self.total, self.pid)
        self.emit([word, self.counter[word]])
'''

WORDCOUNT = '''
from streamparse import Grouping, Topology

from counter import WordCountBolt
from words import WordSpout


class WordCount(Topology):
    word_spout = WordSpout.spec()
    count_bolt = WordCountBolt.spec(inputs={word_spout: Grouping.fields("word")}, par=2)
'''


def write_project(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text))
    return root


@pytest.fixture
def isolated() -> Iterator[None]:
    """Loading a topology file puts its directory, the import roots and its modules
    into this process: taken out again, so tests do not see each other's projects."""
    # Another test in this process may have left a module of the same name (the Flux
    # tests' own words.py): the project's must be imported afresh.
    for name in ("words", "counter", "wordcount"):
        sys.modules.pop(name, None)
    path, modules = list(sys.path), set(sys.modules)
    try:
        yield
    finally:
        sys.path[:] = path
        for name in set(sys.modules) - modules:
            del sys.modules[name]


@pytest.fixture
def wordcount(tmp_path: Path) -> Path:
    return write_project(tmp_path / "wordcount", {"words.py": WORDS, "counter.py": COUNTER,
                                                   "wordcount.py": WORDCOUNT}) / "wordcount.py"


def test_the_streamparse_word_count_counts_right_in_local_mode(wordcount: Path, isolated: None) -> None:
    # Given streamparse's quickstart word count, loaded as `squall local` loads it
    topology = load_topology(str(wordcount))
    counts: dict[str, list[int]] = {}

    def capture(component: str, stream: str, values: Any) -> None:
        if component == "count_bolt":
            counts.setdefault(values.word, []).append(values.count)

    # When it runs
    with LocalCluster() as cluster:
        cluster.submit("wordcount", topology, capture=capture)
        poll_for(lambda: sum(map(len, list(counts.values()))) >= 400, message="400 words counted")
    # Then each word went to one task (fields grouping over par=2) and was counted 1, 2, 3...
    assert set(counts) == {"dog", "cat", "zebra", "elephant"}
    for word, seen in counts.items():
        assert seen == list(range(1, len(seen) + 1)), word
    # And initialize got pystorm's arguments and attributes
    seen = sys.modules["counter"].SEEN
    assert sorted(s["task"] for s in seen) == sorted(s["taskid"] for s in seen) and len(seen) == 2
    for s in seen:
        assert s["topology"] == s["name"] == "wordcount" and s["component"] == "count_bolt"
        assert s["sources"] == {"word_spout": {"default": ["word"]}}
        assert s["logger"] == "pystorm.component.count_bolt" and s["logging"] == "logging" and s["storm_conf"]


def test_import_streamparse_fails_in_plain_python_and_works_under_squall_local(wordcount: Path) -> None:
    # Given Squall's interpreter, streamparse is not installed
    plain = subprocess.run([sys.executable, "-c", "import streamparse"], capture_output=True, text=True,
                           timeout=30, cwd=wordcount.parent)
    assert plain.returncode != 0 and "No module named 'streamparse'" in plain.stderr
    # When `squall local` runs the project's topology file
    command = [sys.executable, "-m", "squall.cli", "local", str(wordcount), "--duration", "1.5"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=REPO)
    # Then it ran, and the bolt's self.logger lines are in the log
    assert result.returncode == 0, result.stderr
    assert "counted [" in result.stderr + result.stdout


BATCHING = '''
from streamparse import BatchingBolt, Grouping, Spout, TicklessBatchingBolt, Topology

ACKED, FAILED, BATCHES = [], [], []
WORDS = ["a", "b", "bad", "a", "c", "a", "b", "a"]


class Words(Spout):
    outputs = ["word"]

    def initialize(self, conf, ctx):
        self.left = list(enumerate(WORDS))

    def next_tuple(self):
        if self.left:
            i, word = self.left.pop(0)
            self.emit([word], tup_id=i)

    def ack(self, tup_id):
        ACKED.append(tup_id)

    def fail(self, tup_id):
        FAILED.append(tup_id)


class PerWord(BatchingBolt):
    outputs = ["word", "n"]

    def group_key(self, tup):
        return tup.values.word

    def process_batch(self, key, tups):
        if key == "bad":
            raise ValueError("a bad batch")
        BATCHES.append((key, len(tups)))
        self.emit([key, len(tups)])


class Every(TicklessBatchingBolt):
    secs_between_batches = 5
    outputs = ["n"]

    def process_batch(self, key, tups):
        BATCHES.append(("every", len(tups)))


class Batched(Topology):
    config = {"topology.tick.tuple.freq.secs": 1}
    words = Words.spec()
    per_word = PerWord.spec(inputs={words: Grouping.GLOBAL})
'''


def test_a_batching_bolt_batches_by_key_between_ticks_and_acks_or_fails_whole_batches(
        tmp_path: Path, isolated: None) -> None:
    # Given a BatchingBolt grouping 8 reliable words by word, one word's batch raising
    topology = load_topology(str(write_project(tmp_path / "b", {"batched.py": BATCHING}) / "batched.py"))
    module = sys.modules["batched"]
    clock = FakeClock()
    with LocalCluster(clock=clock) as cluster:
        runner = cluster.submit("batched", topology)
        poll_for(lambda: runner.stats()["per_word"]["executed"] == 8, message="8 words held")
        # When one tick passes, nothing is processed: pystorm waits for more than
        # ticks_between_batches (1) ticks
        clock.advance(1.0)
        assert stay(lambda: not module.BATCHES and not module.ACKED)
        # When the second does, each batch goes to process_batch with its tuples
        clock.advance(1.0)
        poll_for(lambda: module.FAILED, message="the failing batch's tuples failed")
        # Then the batches before the bad one are acked whole; the bad one and those
        # still held fail (exit_on_exception, as pystorm's dying process would have them)
        poll_for(lambda: len(module.ACKED) + len(module.FAILED) == 8, message="every word settled")
        # And the exception is the bolt's reported error
        poll_for(lambda: any("a bad batch" in e.error for e in cluster.errors("batched")),
                 message="the error reported")
    assert module.BATCHES == [("a", 4), ("b", 2)]
    assert sorted(module.ACKED) == [0, 1, 3, 5, 6, 7] and sorted(module.FAILED) == [2, 4]


def test_secs_between_batches_sets_the_bolts_own_tick_frequency(tmp_path: Path, isolated: None) -> None:
    # Given an older-style bolt batching every 5 seconds
    topology = load_topology(str(write_project(tmp_path / "b", {"batched.py": BATCHING}) / "batched.py"),
                             "Batched")
    module = sys.modules["batched"]
    spec = module.Every.spec(inputs=[module.Batched.words])
    # Then its spec asks for a tick every 5 seconds, over the topology's own frequency
    assert spec.config == {"topology.tick.tuple.freq.secs": 5}
    assert topology.definition().components["per_word"].config == {}


RELIABLE = '''
from streamparse import Bolt, ReliableSpout, Topology

ACKED, FAILED, RAISED, REFUSED = [], [], [], []


class Numbers(ReliableSpout):
    outputs = ["n"]

    def initialize(self, conf, ctx):
        self.left = list(range(20))

    def next_tuple(self):
        if self.left:
            n = self.left.pop(0)
            self.emit([n], tup_id=n)

    def ack(self, tup_id):
        ACKED.append(tup_id)
        super().ack(tup_id)

    def fail(self, tup_id):
        FAILED.append(tup_id)
        super().fail(tup_id)


class Double(Bolt):
    outputs = ["n"]

    def process(self, tup):
        n = tup.values.n
        if n == 3 and 3 not in RAISED:  # auto_fail: the exception fails the tuple
            RAISED.append(n)
            raise RuntimeError("three, once")
        self.emit([n * 2])  # auto_anchor: anchored to tup


class Check(Bolt):
    auto_ack = False

    def process(self, tup):
        if tup.values.n == 20 and 20 not in REFUSED:  # a downstream fail reaches the spout (10)
            REFUSED.append(20)
            self.fail(tup)
        else:
            self.ack(tup)


class Reliable(Topology):
    numbers = Numbers.spec()
    double = Double.spec(inputs=[numbers], par=2)
    check = Check.spec(inputs=[double])
'''


def test_auto_fail_and_auto_anchor_have_a_failing_tuple_replayed_by_the_spout(
        tmp_path: Path, isolated: None) -> None:
    # Given a ReliableSpout, a bolt raising on 3 once and a downstream bolt failing 10 by hand
    topology = load_topology(str(write_project(tmp_path / "r", {"reliable.py": RELIABLE}) / "reliable.py"))
    module = sys.modules["reliable"]
    with LocalCluster() as cluster:
        cluster.submit("reliable", topology)
        # When it runs, both failures reach the spout (the second through the anchor)
        poll_for(lambda: sorted(set(module.ACKED)) == list(range(20)), message="every number acked")
        errors = cluster.errors("reliable")
    # Then each failed once, was replayed by ReliableSpout and acked the second time
    assert sorted(module.FAILED) == [3, 10]
    assert Counter(module.ACKED) == Counter(range(20))
    assert [e.error for e in errors] == ["RuntimeError: three, once"]


GROUPINGS = '''
from streamparse import Bolt, Grouping, Spout, Stream, Topology


class Source(Spout):
    outputs = [Stream(fields=["a", "b"]), Stream(fields=["a"], name="direct", direct=True)]


class Sink(Bolt):
    outputs = ["a"]

    def process(self, tup):
        pass


class Groupings(Topology):
    config = {"topology.workers": 1}
    source = Source.spec(par=2)
    shuffle = Sink.spec(inputs={source: Grouping.SHUFFLE})
    every = Sink.spec(inputs={source: Grouping.ALL})
    one = Sink.spec(inputs={source: Grouping.GLOBAL})
    whichever = Sink.spec(inputs={source: Grouping.NONE})
    near = Sink.spec(inputs={source: Grouping.LOCAL_OR_SHUFFLE})
    pinned = Sink.spec(inputs={source["direct"]: Grouping.DIRECT})
    listed = Sink.spec(inputs=[source["direct"]])
    keyed = Sink.spec(inputs={source: Grouping.fields(["a", "b"])}, name="by-key")
    chained = Sink.spec(inputs=[shuffle, every])
'''


def test_streamparse_groupings_streams_and_names_build_the_topology(tmp_path: Path, isolated: None) -> None:
    topology = load_topology(str(write_project(tmp_path / "g", {"groupings.py": GROUPINGS}) / "groupings.py"))
    components = topology.definition().components

    def grouping(name: str) -> tuple[str, str, str, tuple[str, ...]]:
        [inp] = components[name].inputs
        return inp.component, inp.stream, inp.grouping.type, inp.grouping.fields

    assert grouping("shuffle") == ("source", "default", "shuffle", ())
    assert grouping("every")[2:] == ("all", ())
    assert grouping("one")[2:] == ("global", ())
    assert grouping("whichever")[2:] == ("none", ())
    assert grouping("near")[2:] == ("local_or_shuffle", ())
    assert grouping("pinned") == ("source", "direct", "direct", ())
    assert grouping("listed") == ("source", "direct", "direct", ())  # a listed direct stream: direct
    assert grouping("by-key") == ("source", "default", "fields", ("a", "b"))
    assert [(i.component, i.grouping.type) for i in components["chained"].inputs] == [
        ("shuffle", "shuffle"), ("every", "shuffle")]
    assert components["source"].par == 2 and components["source"].streams["direct"].direct


@pytest.mark.parametrize(("source", "expected"), [
    ("JavaBolt.spec(full_class_name='com.example.Split', args_list=[], inputs=[s])",
     "JavaBolt.spec('com.example.Split'): Squall's workers are Python processes with no JVM"),
    ("JavaSpout.spec(serialized_java=b'\\\\xac\\\\xed')",
     "JavaSpout.spec('serialized Java'): Squall's workers are Python processes with no JVM"),
    ("Bolt.spec(inputs={s: Grouping.custom_object('com.example.G', [])})",
     "Grouping.custom_object('com.example.G', ...) names a Java grouping class"),
    ("Bolt.spec(inputs=[s], par={'prod': 4})",
     "par={'prod': 4} gives a parallelism per sparse environment"),
])
def test_java_components_and_groupings_are_refused_when_the_topology_is_defined(
        tmp_path: Path, isolated: None, source: str, expected: str) -> None:
    text = f'''
from streamparse import Bolt, Grouping, JavaBolt, JavaSpout, Spout, Topology

class S(Spout):
    outputs = ["x"]

s = S.spec()

class T(Topology):
    s = s
    x = {source}
'''
    path = write_project(tmp_path / "j", {"java.py": text}) / "java.py"
    with pytest.raises(TopologyValidationError) as caught:
        load_topology(str(path))
    assert expected in str(caught.value)


SHELL = '''
import sys

from streamparse import ShellBolt, ShellSpout, Topology


class Shelled(Topology):
    lines = ShellSpout.spec(command="node", script="lines.js --fast", outputs=["line"], par=2)
    split = ShellBolt.spec(command=sys.executable, script="split.py", inputs=[lines], outputs=["word"])
'''


def test_shell_components_become_squalls_multilang_components(tmp_path: Path, isolated: None) -> None:
    path = write_project(tmp_path / "s", {"shelled.py": SHELL}) / "shelled.py"
    components = load_topology(str(path)).definition().components
    lines, split = components["lines"], components["split"]
    assert (lines.cls.__module__, split.cls.__module__) == ("squall.multilang.spout", "squall.multilang.bolt")
    assert (lines.options["command"], lines.options["script"], lines.options["args"]) == (
        "node", "lines.js", ["--fast"])
    assert lines.par == 2 and lines.streams["default"].fields == ("line",)
    assert split.options["command"] == sys.executable and split.options["script"] == "split.py"
    assert split.options["defined_in"] == str(path.parent)  # the script is found beside the topology file
