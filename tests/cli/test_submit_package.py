"""``squall submit --dry-run``: the manifest a submit prints -- every file with
its size and why it goes, and the total -- is what the topology imports from
the project, what its shell components run and what the include list names,
never the rest of the directory (issue 30: the word count shipped all of
``examples/``).  Run for real in a subprocess, without a cluster."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\s+([\d,]+)\s+(\S+)\s+(.+)$")

TOPOLOGY = textwrap.dedent("""
    import sys

    import common
    from squall import Grouping, Topology
    from squall.multilang import ShellBolt
    from words import Count, Sentences


    class Project(Topology):
        sentences = Sentences.spec()
        split = ShellBolt.spec(command=sys.executable, script="split.py", outputs=["word"],
                               inputs=[sentences])
        count = Count.spec(inputs={split: Grouping.fields("word")})
""")

WORDS = textwrap.dedent("""
    from squall import Bolt, Spout


    class Sentences(Spout):
        outputs = ["sentence"]

        def next_tuple(self):
            self.emit(["a b"])


    class Count(Bolt):
        outputs = ["word", "count"]

        def process(self, tup):
            self.emit([tup.values.word, 1])
""")


def submit(*args: str, cwd: Path, home: Path, path: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), path) if p)}
    env.pop("SQUALL_CONF", None)  # no cluster: --dry-run needs none
    return subprocess.run([sys.executable, "-m", "squall.cli", "submit", "--dry-run", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60, check=False, env=env)


def manifest(stdout: str) -> dict[str, str]:
    """Path -> why, from the printed manifest; its sizes add up to the printed total."""
    rows = [m.groups() for line in stdout.splitlines() if (m := ROW.match(line))]
    total = re.search(r"total: (\d+) files?, ([\d,]+) bytes", stdout)
    assert total, stdout
    assert int(total.group(1)) == len(rows)
    assert int(total.group(2).replace(",", "")) == sum(int(size.replace(",", "")) for size, _, _ in rows)
    return {path: why for _size, path, why in rows}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def test_the_word_count_packs_itself_not_all_of_examples(home: Path) -> None:
    result = submit("examples/wordcount.py", cwd=REPO, home=home)
    assert result.returncode == 0, result.stderr
    assert manifest(result.stdout) == {"wordcount.py": "the topology"}


def test_a_multilang_topology_packs_its_resources_directory(home: Path) -> None:
    result = submit("examples/multilang/wordcount.py", cwd=REPO, home=home)
    assert result.returncode == 0, result.stderr
    packed = manifest(result.stdout)
    assert packed["resources/splitsentence.js"] == "resource of sentences, split"
    assert packed["resources/sentences.py"] == "resource of sentences, split"
    assert "README.md" not in packed


def test_a_flux_file_packs_the_classes_it_names_and_its_scripts(home: Path) -> None:
    result = submit("examples/flux/wordcount.yaml", cwd=REPO, home=home)
    assert result.returncode == 0, result.stderr
    # the YAML is read here; the workers get its classes and its child's script
    assert manifest(result.stdout) == {"words.py": "imported (words)",
                                       "resources/splitsentence.py": "resource of split"}


def test_a_project_packs_its_imports_its_script_and_its_includes(tmp_path: Path, home: Path) -> None:
    # Given a project: a sibling module, a child script beside the topology, data, clutter,
    # and a module imported from a directory outside the project
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    (project / "topology.py").write_text(TOPOLOGY)
    (project / "words.py").write_text(WORDS)
    (project / "split.py").write_text("import split_rules\n")
    (project / "split_rules.py").write_text("RULES = []\n")
    (project / "data" / "stop.csv").write_text("a,the\n")
    (project / "unrelated.py").write_text("X = 1\n")
    (project / "run.log").write_text("x" * 10_000)
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "common.py").write_text("C = 1\n")

    result = submit("topology.py", "--include", "data/*.csv", cwd=project, home=home, path=str(shared))

    assert result.returncode == 0, result.stderr
    assert manifest(result.stdout) == {
        "topology.py": "the topology",
        "words.py": "imported (words)",
        "split.py": "resource of split",
        "split_rules.py": "resource of split",  # what the Python child imports
        "data/stop.csv": "included by 'data/*.csv'",
    }
    assert f"module 'common' ({shared / 'common.py'}) is imported but lies outside the project root" \
        in result.stderr
    assert "not submitted (--dry-run)" in result.stdout

    # An include that names nothing is refused, by its name, before anything is sent
    missing = submit("topology.py", "--include", "data/*.json", cwd=project, home=home, path=str(shared))
    assert missing.returncode == 1
    assert "package include 'data/*.json' matches no file under" in missing.stderr
    assert "code package" not in missing.stdout

    # topology.package.include adds to --include
    both = submit("topology.py", "--include", "data/*.csv", "--conf", "topology.package.include=['*.log']",
                  cwd=project, home=home, path=str(shared))
    assert both.returncode == 0, both.stderr
    assert manifest(both.stdout)["run.log"] == "included by '*.log'"
