"""The Trident examples run as their docstrings say: Storm's TridentReach answers its known
reaches, the Trident word count answers its DRPC function in local mode, and `squall local`
runs the word count file (its DRPC stream idle, having no server)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from squall import LocalCluster
from squall.drpc import LocalDRPC
from squall.testing import poll_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "trident"


def example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"trident_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # the workers unpickle its classes by name
    spec.loader.exec_module(module)
    return module


def test_reach_answers_storms_known_reaches() -> None:
    reach = example("reach")
    with LocalDRPC() as drpc, LocalCluster() as cluster:
        cluster.submit("reach", reach.build(drpc).build("reach"))
        assert json.loads(drpc.execute("reach", "foo.com/blog/1")) == [[16]]
        assert json.loads(drpc.execute("reach", "engineering.twitter.com/blog/5")) == [[14]]
        assert json.loads(drpc.execute("reach", "aaa")) == [[0]]


def test_the_word_count_answers_its_drpc_function() -> None:
    wordcount = example("wordcount")
    with LocalDRPC() as drpc, LocalCluster() as cluster:
        cluster.submit("wordcount", wordcount.build(drpc).build("wordcount"))

        def counted() -> int:
            return int(json.loads(drpc.execute("words", "cat the dog jumped"))[0][0])

        first = poll_for(counted, timeout=30, message="words counted")
        poll_for(lambda: counted() > first, timeout=30, message="the counts growing")
        # Each round of the five sentences has "the" 5 times and "jumped" once; counts only
        # grow, so "the" asked after "jumped" is at least 5 per round counted then, less a round
        jumped = int(json.loads(drpc.execute("words", "jumped"))[0][0])
        the = int(json.loads(drpc.execute("words", "the"))[0][0])
        assert jumped > 0 and the >= 5 * jumped - 5


def test_squall_local_runs_the_word_count_file() -> None:
    result = subprocess.run([sys.executable, "-m", "squall.cli", "local", str(EXAMPLES / "wordcount.py"),
                             "--duration", "3"], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "no request will come" in result.stdout + result.stderr


def test_the_trident_guides_example_runs_as_written(tmp_path: Path) -> None:
    text = (EXAMPLES.parents[1] / "docs" / "trident.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    script = tmp_path / "guide.py"
    script.write_text(code)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                            check=False, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
