"""What a topology's code package holds (squall.runtime.manifest): what the
topology imports from the project, what its shell components run, what an
include list names -- and nothing else of the directory it sits in."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import squall
from squall.errors import SquallError
from squall.runtime.manifest import (
    IMPORTED,
    INCLUDED,
    PACKAGE,
    RESOURCE,
    TOPOLOGY,
    Entry,
    Resource,
    code_manifest,
    outside,
)

REPO = Path(__file__).resolve().parents[2]

TOPOLOGY_PY = """
from squall import Topology
import helpers
from bolts.count import Count


class Words(Topology):
    pass
"""

COUNT_PY = """
from . import util


class Count:
    def initialize(self, conf, context):
        import lazy_dep  # only on the worker: a static scan must still see it
        return lazy_dep
"""


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return tree(tmp_path / "project", {
        "topology.py": TOPOLOGY_PY,
        "helpers.py": "import json\nVALUE = 1\n",
        "bolts/__init__.py": "",
        "bolts/count.py": COUNT_PY,
        "bolts/util.py": "X = 1\n",
        "bolts/unused.py": "X = 2\n",
        "lazy_dep.py": "Y = 1\n",
        "other_topology.py": "import helpers\n",
        "notes.md": "# notes\n",
        "data/words.txt": "a b c\n",
        "data/more/extra.txt": "d\n",
        "data/.hidden": "h\n",
        "certs/ca.pem": "PUBLIC CA\n",
        ".env": "SECRET=1\n",
        "server.key": "PRIVATE\n",
        "venv/pyvenv.cfg": "home = /usr\n",
        "venv/lib/site-packages/installed.py": "Z = 1\n",
    })


def listed(entries: list[Entry]) -> dict[str, tuple[str, str]]:
    return {e.path: (e.why, e.detail) for e in entries}


def test_the_topology_and_what_it_imports_from_the_project_and_nothing_else(project: Path) -> None:
    entries = code_manifest(project / "topology.py")
    assert listed(entries) == {
        "topology.py": (TOPOLOGY, "topology"),
        "helpers.py": (IMPORTED, "helpers"),
        "bolts/__init__.py": (IMPORTED, "bolts"),
        "bolts/count.py": (IMPORTED, "bolts.count"),
        "bolts/util.py": (IMPORTED, "bolts.util"),  # a relative import
        "lazy_dep.py": (IMPORTED, "lazy_dep"),  # imported inside a method
    }
    assert [e.path for e in entries] == sorted(e.path for e in entries)
    sizes = {e.path: e.size for e in entries}
    assert sizes["helpers.py"] == len("import json\nVALUE = 1\n")
    assert next(e for e in entries if e.path == "bolts/count.py").source == project / "bolts" / "count.py"


def test_modules_the_process_imported_go_too_but_never_installed_ones(project: Path) -> None:
    # Given modules imported at load time by name only (a Flux className, importlib), one in
    # a virtualenv under the root, Squall's own and the standard library's
    modules = {
        "by_name": str(tree(project, {"by_name.py": "Q = 1\n"}) / "by_name.py"),
        "installed": str(project / "venv" / "lib" / "site-packages" / "installed.py"),
        "squall": squall.__file__,
        "json": sys.modules["json"].__file__,
        "__main__": str(project / "other_topology.py"),
    }
    entries = listed(code_manifest(project / "topology.py", modules=modules))
    assert entries["by_name.py"] == (IMPORTED, "by_name")
    assert not {"venv/lib/site-packages/installed.py", "installed.py", "other_topology.py"} & set(entries)
    assert not [p for p in entries if p.startswith(("squall", "json"))]


def test_squall_is_never_packed_even_under_the_root() -> None:
    modules = {name: m.__file__ for name, m in sys.modules.items()
               if name.split(".")[0] == "squall" and getattr(m, "__file__", None)}
    entries = code_manifest(REPO / "examples" / "wordcount.py", REPO, modules=modules)
    assert [e.path for e in entries] == ["wordcount.py"]


def test_include_patterns_add_data_files(project: Path) -> None:
    def included(*patterns: str) -> dict[str, tuple[str, str]]:
        return {p: w for p, w in listed(code_manifest(project / "topology.py", include=patterns)).items()
                if w[0] == INCLUDED}

    assert included("data/*.txt") == {"data/words.txt": (INCLUDED, "data/*.txt")}
    assert set(included("data")) == {"data/words.txt", "data/more/extra.txt"}  # never its dotfiles
    assert set(included("**/*.txt", "*.md")) == {"data/words.txt", "data/more/extra.txt", "notes.md"}
    assert set(included("*")) >= {"notes.md", "other_topology.py"}
    assert not {".env", "server.key", "certs/ca.pem", "venv/pyvenv.cfg"} & set(included("*", "**/*"))
    # A file named exactly is the user's choice, even one a glob leaves out
    assert included("certs/ca.pem") == {"certs/ca.pem": (INCLUDED, "certs/ca.pem")}
    # A pattern that matches nothing is a mistake, said with its name
    with pytest.raises(SquallError, match=r"package include 'data/\*\.csv' matches no file under"):
        code_manifest(project / "topology.py", include=["data/*.csv"])
    for bad in ("../outside", "/etc/passwd", ""):
        with pytest.raises(SquallError, match="relative glob inside the project root"):
            code_manifest(project / "topology.py", include=[bad])


def test_an_include_never_follows_a_link_out_of_the_root(project: Path, tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("not yours")
    os.symlink(tmp_path / "secret", project / "data" / "link.txt")
    assert "data/link.txt" not in listed(code_manifest(project / "topology.py", include=["data"]))
    with pytest.raises(SquallError, match="matches no file"):
        code_manifest(project / "topology.py", include=["data/link.txt"])


def test_shell_resources_a_directory_whole_or_a_script_with_its_imports(project: Path) -> None:
    tree(project, {
        "resources/split.js": "//\n",
        "resources/lib/adapter.js": "//\n",
        "resources/.npmrc": "token\n",
        "count.py": "import helpers\nimport child_lib\n",
        "child_lib.py": "Z = 1\n",
    })
    entries = listed(code_manifest(project / "topology.py", resources=[
        Resource(project / "resources", "split"), Resource(project / "resources", "sentences"),
        Resource(project / "count.py", "count")]))
    assert entries["resources/split.js"] == (RESOURCE, "split, sentences")
    assert entries["resources/lib/adapter.js"] == (RESOURCE, "split, sentences")
    assert "resources/.npmrc" not in entries
    assert entries["count.py"] == (RESOURCE, "count")
    assert entries["child_lib.py"] == (RESOURCE, "count")  # what the Python child imports
    assert entries["helpers.py"] == (IMPORTED, "helpers")  # already there: stays the topology's
    with pytest.raises(SquallError, match=r"component 'far': .* is outside the project root"):
        code_manifest(project / "topology.py", resources=[Resource(project.parent, "far")])


def test_a_root_above_the_topology_packs_modules_where_their_names_say(tmp_path: Path) -> None:
    # Given a streamparse-like project: topologies/ and src/ (on the path) under one root
    root = tree(tmp_path / "proj", {
        "topologies/wc.py": "import words\nfrom shared import tools\n",
        "src/words.py": "W = 1\n",
        "src/shared/__init__.py": "",
        "src/shared/tools.py": "T = 1\n",
        "topologies/resources/split.py": "#\n",
        "README.md": "#\n",
    })
    entries = code_manifest(root / "topologies" / "wc.py", root, ["README.md"],
                            resources=[Resource(root / "topologies" / "resources", "split")],
                            search_path=[str(root / "src")])
    # a worker imports by name from the package's top; resources and includes keep their place
    assert listed(entries) == {
        "wc.py": (TOPOLOGY, "wc"),
        "words.py": (IMPORTED, "words"),
        "shared/__init__.py": (IMPORTED, "shared"),
        "shared/tools.py": (IMPORTED, "shared.tools"),
        "topologies/resources/split.py": (RESOURCE, "split"),
        "README.md": (INCLUDED, "README.md"),
    }


def test_a_package_above_the_root_comes_with_its_module(tmp_path: Path) -> None:
    base = tree(tmp_path / "base", {"app/__init__.py": "", "app/jobs/topology.py": "from app import jobs\n",
                                    "app/jobs/__init__.py": ""})
    modules = {"app": str(base / "app" / "__init__.py"),
               "app.jobs": str(base / "app" / "jobs" / "__init__.py")}
    entries = listed(code_manifest(base / "app" / "jobs" / "topology.py", modules=modules))
    assert entries["app/__init__.py"] == (PACKAGE, "app")
    assert entries["app/jobs/__init__.py"] == (IMPORTED, "app.jobs")


def test_two_files_for_one_place_and_a_topology_outside_the_root_are_refused(project: Path,
                                                                           tmp_path: Path) -> None:
    tree(project, {"elsewhere/helpers.py": "#\n"})
    with pytest.raises(SquallError, match=r"two files would be packed as helpers\.py"):
        code_manifest(project / "topology.py", modules={"helpers": str(project / "elsewhere" / "helpers.py")},
                      include=["helpers.py"])
    with pytest.raises(SquallError, match="is not under the project root"):
        code_manifest(project / "topology.py", project / "bolts")


def test_modules_outside_the_root_that_are_not_installed_are_named(project: Path, tmp_path: Path) -> None:
    stray = tree(tmp_path / "shared", {"common.py": "#\n"}) / "common.py"
    modules = {"common": str(stray), "helpers": str(project / "helpers.py"),
               "json": sys.modules["json"].__file__, "squall": squall.__file__}
    assert outside(modules, project) == {"common": str(stray)}
