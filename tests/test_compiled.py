"""The hot path's Cython builds (squall/compiled): used when current, never stale,
and the pure Python they are built from still runs the same topologies.

`ops/bootstrap.sh`, which CI runs before the tests, builds them: the rest of
the suite runs compiled, and these tests check both sides of the switch."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from squall import compiled

REPO = Path(__file__).resolve().parent.parent

STATUS = ("import json, importlib; from squall import compiled\n"
          "for m in compiled.MODULES: importlib.import_module(m)\n"
          "print(json.dumps(compiled.status()))")


def status_in_child(env: dict[str, str] | None = None, path: Path = REPO) -> dict[str, bool]:
    env = {**os.environ, "PYTHONPATH": str(path), **(env or {})}
    out = subprocess.run([sys.executable, "-c", STATUS], env=env, cwd=path, capture_output=True, text=True,
                         check=True, timeout=60)
    return json.loads(out.stdout)


def test_the_bootstrap_built_every_hot_path_module_and_a_worker_runs_them() -> None:
    # Given the checkout ops/bootstrap.sh set up: every build is current
    assert compiled.current() == len(compiled.MODULES), "run: python -m squall.compiled build"
    # Then a new process imports every hot-path module from its build
    assert status_in_child() == dict.fromkeys(compiled.MODULES, True)
    # and a worker of `squall local` says so when it starts
    run = subprocess.run([str(REPO / ".venv/bin/squall"), "--log-level", "info", "local",
                          str(REPO / "examples/wordcount.py"), "--duration", "2"],
                         cwd=REPO, capture_output=True, text=True, timeout=120, check=True)
    said = re.search(r"(\d+) of the (\d+) hot-path modules loaded run compiled", run.stdout + run.stderr)
    assert said is not None and said[1] == said[2] and int(said[1]) >= len(compiled.MODULES) - 1  # not zmq


def test_an_edited_module_runs_its_source_never_a_stale_build(tmp_path: Path) -> None:
    # Given a copy of the package with its builds, in which one module was edited
    shutil.copytree(REPO / "squall", tmp_path / "squall", ignore=shutil.ignore_patterns("__pycache__"))
    routing = tmp_path / "squall/worker/executors/routing.py"
    routing.write_text(routing.read_text() + "\nEDITED = True\n")
    # Then that module is imported from its source, and the others from their builds
    status = status_in_child(path=tmp_path)
    assert status["squall.worker.executors.routing"] is False
    assert all(v for m, v in status.items() if m != "squall.worker.executors.routing")
    probe = "import squall.worker.executors.routing as r; print(r.EDITED, r.__file__)"
    out = subprocess.run([sys.executable, "-c", probe], env={**os.environ, "PYTHONPATH": str(tmp_path)},
                         cwd=tmp_path, capture_output=True, text=True, check=True, timeout=60).stdout
    assert out.split() == ["True", str(routing)]


# An emit of one tree, its rows framed and read back as the receiving worker reads them.
ROUND_TRIP = """
from squall.topology.tuple import Tuple, record_type
from squall.worker.executors import emit, routing
from squall.worker.executors.acks import AckTable
from squall.worker.wire import codec
from squall.worker.wire.frames import WireValidator
from squall.worker.wire.codec import RemoteBatch, check_values
from tests.worker.wire_topology import PLAN
word = record_type(("word",))
local, remote = [], RemoteBatch()
state = emit.TaskState()
state.current = Tuple(5, "spout", "default", 3, word("a b"), {77: 5})
streams = {"default": emit.StreamOut("default", word, ("word",), routing.all_tasks([2]), False)}
bolt = emit.bolt_emitter("words", 3, streams, {2: remote.append}, True, emit.random_ids(), check_values,
                         False, None, True, state)
bolt(["cow"])
tracker = emit.SpoutTracker([1], [1])
spout = emit.spout_emitter("words", 3, streams, {2: local.append}, emit.random_ids(), check_values, False,
                           None, tracker, lambda: 1.0, emit.TaskState())
spout(["moon"], tup_id="m1")
acks = AckTable()
acks.add(state.current)
(rows,) = remote.take()
[(kind, task, (got,))] = WireValidator(PLAN, [2]).decode(codec.encode([("data", 2, rows)]))
assert got.values.word == "cow" and got.anchors == {77: got.id}
assert acks.drain() == [(77, 5 ^ got.id)]
assert [v[1] for _, v in tracker.pending.items()] == ["m1"] and local[0].values.word == "moon"
print("ok")
"""


@pytest.mark.parametrize("edited", [("worker/executors/emit.py",), ("worker/executors/acks.py",),
                                    ("worker/wire/codec.py", "worker/wire/reader.py")])
def test_typed_modules_edited_beside_built_ones_run_from_their_source(tmp_path: Path,
                                                                      edited: tuple[str, ...]) -> None:
    # Given a copy of the package with its builds, in which typed modules that read a built
    # Tuple's C fields, or call the built modules they cimport, were edited
    shutil.copytree(REPO / "squall", tmp_path / "squall", ignore=shutil.ignore_patterns("__pycache__"))
    for name in edited:
        source = tmp_path / "squall" / name
        source.write_text(source.read_text() + "\n# edited\n")
    # Then they run from their source (and so does what cimports them), the Tuple from its build
    status = status_in_child(path=tmp_path)
    assert status["squall.topology.tuple"] is True
    assert not any(status[f"squall.{n[:-3].replace('/', '.')}"] for n in edited)
    # and an emit to this worker and to another, its ack and a frame of it still do what they do
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}:{REPO}"}
    out = subprocess.run([sys.executable, "-c", ROUND_TRIP], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=60, check=False)
    assert out.stdout.split() == ["ok"], out.stderr[-2000:]


def test_squall_pure_python_turns_the_builds_off_and_the_engine_still_holds(tmp_path: Path) -> None:
    # Given SQUALL_PURE_PYTHON=1, nothing is loaded from a build
    assert status_in_child({compiled.PURE_ENV: "1"}) == dict.fromkeys(compiled.MODULES, False)
    # and the message-flow guarantees (acks, fails, timeouts, replays, max spout pending)
    # and the exact word count under random failures hold in pure Python too, and so does
    # what the hot path's typed modules promise, their one source run by the interpreter
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "tests/test_message_flow.py", "tests/test_wordcount_failures.py",
                          "tests/worker/test_emit.py", "tests/topology/test_tuple.py",
                          "tests/worker/test_pending.py", "tests/acker/test_ledger.py",
                          "tests/worker/test_codec.py", "tests/worker/test_remote_batch.py",
                          "tests/worker/test_reader.py", "tests/worker/test_frame_fuzz.py"],
                         env={**os.environ, compiled.PURE_ENV: "1"}, cwd=REPO, capture_output=True,
                         text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout[-3000:]
    # The last line: the slowest tests are listed above it, and their names may say "failed".
    summary = run.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary, summary


def test_a_build_is_named_by_its_source_and_the_declarations_it_reads(tmp_path: Path) -> None:
    # A module's build reads its own .pxd and those it cimports (theirs in turn), no other
    pxd = compiled.PACKAGE_DIR / "topology/tuple.pxd"
    assert pxd in compiled.declarations_of("squall.worker.wire.reader")
    assert pxd in compiled.declarations_of("squall.topology.tuple")
    # plain Python: its imports read no .pxd
    assert compiled.declarations_of("squall.worker.executors.routing") == []
    assert not {compiled.PACKAGE_DIR / "worker/wire/reader.pxd", pxd} & set(
        compiled.declarations_of("squall.acker.ledger"))
    # So a changed layout renames the builds of the modules that read it, and only theirs
    shutil.copytree(REPO / "squall", tmp_path / "squall",
                    ignore=shutil.ignore_patterns("__pycache__", "_compiled"))
    names = ("import json; from squall import compiled\n"
             "print(json.dumps({m: compiled.build_path(m).name for m in compiled.MODULES}))")

    def build_names() -> dict[str, str]:
        out = subprocess.run([sys.executable, "-c", names], env={**os.environ, "PYTHONPATH": str(tmp_path)},
                             cwd=tmp_path, capture_output=True, text=True, check=True, timeout=60).stdout
        return json.loads(out)

    before = build_names()
    layout = tmp_path / "squall/topology/tuple.pxd"
    layout.write_text(layout.read_text() + "\n# edited\n")
    after = build_names()
    readers = {m for m in compiled.MODULES if pxd in compiled.declarations_of(m)}
    assert {m for m in compiled.MODULES if before[m] != after[m]} == readers
    assert "squall.worker.executors.emit" in readers and "squall.worker.executors.routing" not in readers
    # And an edited source renames the builds of the modules that cimport it: the edited
    # module runs from its source, and so must they (a build could not load beside it)
    source = tmp_path / "squall/worker/executors/pending.py"
    source.write_text(source.read_text() + "\n# edited\n")
    edited = build_names()
    assert {m for m in compiled.MODULES if after[m] != edited[m]} == {
        "squall.worker.executors.pending", "squall.worker.executors.emit", "squall.worker.executors.acks"}


def test_each_hot_path_module_has_one_source() -> None:
    # No module is written twice: none for Cython alone (.pyx), and each .pxd types the .py beside it
    assert not list(compiled.PACKAGE_DIR.rglob("*.pyx"))
    typed = {compiled.module_of(p) for p in compiled.declarations()}
    assert typed <= set(compiled.MODULES)
    assert all(compiled.source_of(m).is_file() for m in typed)
    assert {"squall.worker.executors.emit", "squall.worker.executors.acks", "squall.worker.wire.codec",
            "squall.worker.wire.reader", "squall.topology.tuple"} <= typed
