"""The package graph stands in floors (docs/layout.md): each package imports
only packages on its own floor or below, never in a circle; kazoo only in
squall/cluster, ZeroMQ only in the worker's transport.

Imports are read from the source, the way Python would run them: at module
level, inside functions, under ``if TYPE_CHECKING``, in a package's lazy
export table (``lazy_exports``), and "package.module:Name" class paths.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "squall"

# Lowest first.  A unit is a subpackage of squall or a top-level module of it.
FLOORS: list[tuple[str, set[str]]] = [
    ("ground", {"errors", "clock", "config", "lazy", "affinity", "plugins", "version", "runtime", "security",
                "metrics", "acker", "compiled", "tuning"}),
    ("api", {"topology"}),
    ("engine", {"worker", "cluster"}),
    ("features", {"transactional", "trident", "drpc", "windowing", "state", "flux", "multilang", "spark",
                  "contrib", "compat", "streams"}),
    ("daemons", {"nimbus", "supervisor", "drpc_server", "local", "ui", "httpd", "testing", "__init__"}),
    ("cli", {"cli"}),
]

# The features floor has an order of its own (docs/layout.md, "Inside the features floor"):
# a feature imports only features on a lower step, so that each can be read, tested and
# changed knowing only those under it.  Lowest first.
FEATURE_STEPS: list[set[str]] = [
    {"transactional", "drpc", "multilang", "spark"},
    {"state", "flux", "compat"},
    {"windowing"},
    {"trident", "streams"},
    {"contrib"},
]

# The worker's own order (squall/worker/__init__.py): what every part shares (the plan, the
# backpressure flag, gc tuning), then the wire, the executors over it, the Worker placing
# them, and the OS process around it.  Lowest first; a part imports only parts below it.
WORKER_STEPS: list[set[str]] = [
    {"plan", "backpressure", "gc_tuning", "event_lines"},
    {"event_log"},
    {"wire"},
    {"executors"},
    {"worker"},
    {"process"},
    {"__main__"},
]

# Names a package re-exports from another for its users, resolved on first use,
# that its own code never uses: not a dependency of the package, so not an arrow.
ALIASES = {
    # docs/state.md and docs/windowing.md: StatefulWindowedBolt from either package.
    ("squall.state", "squall.windowing.stateful"),
}

# Third-party packages that one place alone may import.
WALLED = {
    "kazoo": ("squall.cluster",),  # coordination: ZooKeeper only through squall.cluster
    "zmq": ("squall.worker.wire.zmq_transport",),  # the wire: only the worker's transport
}


def modules() -> dict[str, Path]:
    found = {}
    # a .py typed in Cython's pure-Python mode has its .pxd beside it, read with it (imports)
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = modules()


def unit_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def floor_of(module: str) -> int:
    unit = unit_of(module)
    for level, (_name, units) in enumerate(FLOORS):
        if unit in units:
            return level
    pytest.fail(f"{module}: package {unit!r} stands on no floor; add it to FLOORS and docs/layout.md")


def target(name: str) -> str | None:
    """The squall module ``name`` is, or is inside (a name imported from a module)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


# A Cython module's or declaration file's imports and cimports, read line by line (ast
# cannot parse them).
CYTHON_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+c?import\s+(.+)|c?import\s+([\w.]+))")


def cython_imports(path: Path) -> Iterator[tuple[str, int]]:
    for line_no, line in enumerate(path.read_text().splitlines(), 1):
        m = CYTHON_IMPORT.match(line)
        if m is None or (m[1] or m[3]).split(".")[0] in ("cython", "libc", "cpython"):
            continue  # C declarations Cython ships, not modules
        if m[3]:
            yield m[3], line_no
            continue
        for name in m[2].strip("() ").split(","):
            sub = f"{m[1]}.{name.split(' as ')[0].strip()}"
            yield (sub if sub in MODULES else m[1]), line_no


def imports(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """(imported name, line) for every import in ``path``: squall modules and third-party tops."""
    if path.with_suffix(".pxd").is_file():  # its C declarations, whose cimports it compiles with
        yield from cython_imports(path.with_suffix(".pxd"))
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if base.startswith("cython.cimports."):  # pure-Python mode's cimport
                base = base.removeprefix("cython.cimports.")
                if base.split(".")[0] in ("libc", "cpython"):
                    continue  # C declarations Cython ships, not modules
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield (sub if sub in MODULES else base), node.lineno
        elif isinstance(node, ast.Dict) and path.name == "__init__.py":
            # A package's lazy export table: {"Name": "squall.x.y"}, imported on first use.
            for value in node.values:
                if isinstance(value, ast.Constant) and str(value.value) in MODULES:
                    yield str(value.value), node.lineno
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and ":" in node.value:
            # A class path, "squall.x.y:Name", that resolve_class imports.
            name, _, attr = node.value.partition(":")
            if name in MODULES and attr.replace(".", "").isidentifier():
                yield name, node.lineno


def graph() -> dict[str, dict[str, int]]:
    edges: dict[str, dict[str, int]] = defaultdict(dict)
    for module, path in MODULES.items():
        for name, line in imports(module, path):
            if name.startswith("squall"):
                found = target(name)
                if found and found != module and (module, found) not in ALIASES:
                    edges[module].setdefault(found, line)
            else:
                edges[module].setdefault(name.split(".")[0], line)
    return edges


EDGES = graph()


def where(module: str, line: int) -> str:
    return f"{MODULES[module].relative_to(ROOT)}:{line}"


def test_no_import_goes_up_a_floor() -> None:
    upward = []
    for module, targets in EDGES.items():
        for found, line in targets.items():
            if found in MODULES and floor_of(found) > floor_of(module):
                upward.append(f"{where(module, line)}: {module} ({FLOORS[floor_of(module)][0]}) imports "
                              f"{found} ({FLOORS[floor_of(found)][0]})")
    assert not upward, "imports that go up a floor:\n" + "\n".join(sorted(upward))


def step_of(unit: str) -> int:
    for step, units in enumerate(FEATURE_STEPS):
        if unit in units:
            return step
    pytest.fail(f"feature {unit!r} stands on no step of the features floor; add it to FEATURE_STEPS "
                "and to docs/layout.md")


def test_features_import_only_features_below_them() -> None:
    features = FLOORS[3][1]
    assert features == set().union(*FEATURE_STEPS), "FEATURE_STEPS and the features floor differ"
    sideways = []
    for module, targets in EDGES.items():
        for found, line in targets.items():
            here, there = unit_of(module), unit_of(found) if found in MODULES else ""
            if here in features and there in features and here != there and step_of(there) >= step_of(here):
                sideways.append(f"{where(module, line)}: {module} (step {step_of(here) + 1}) imports "
                                f"{found} (step {step_of(there) + 1})")
    assert not sideways, "features importing a feature not below them:\n" + "\n".join(sorted(sideways))


def worker_part(module: str) -> str:
    return module.split(".")[2]


def test_the_worker_parts_import_only_parts_below_them() -> None:
    parts = {worker_part(m) for m in MODULES if m.startswith("squall.worker.")}
    assert parts == set().union(*WORKER_STEPS), "WORKER_STEPS and squall/worker/ differ"
    step = {part: n for n, parts in enumerate(WORKER_STEPS) for part in parts}
    upward = []
    for module, targets in EDGES.items():
        if not module.startswith("squall.worker."):
            continue
        for found, line in targets.items():
            if (found.startswith("squall.worker.") and worker_part(found) != worker_part(module)
                    and step[worker_part(found)] >= step[worker_part(module)]):
                upward.append(f"{where(module, line)}: {module} imports {found}")
    assert not upward, "worker parts importing a part not below them:\n" + "\n".join(sorted(upward))


def circles(nodes: list[str], succ: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(succ.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(succ.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_module_import_circle() -> None:
    succ = {m: {t for t in targets if t in MODULES} for m, targets in EDGES.items()}
    found = circles(sorted(MODULES), succ)
    assert not found, "modules that import each other, through any path:\n" + "\n".join(map(str, found))


def test_no_package_import_circle() -> None:
    succ: dict[str, set[str]] = defaultdict(set)
    for module, targets in EDGES.items():
        for found in targets:
            if found in MODULES and unit_of(found) != unit_of(module):
                succ[unit_of(module)].add(unit_of(found))
    found = circles(sorted({unit_of(m) for m in MODULES}), succ)
    assert not found, "packages that import each other, through any path:\n" + "\n".join(map(str, found))


@pytest.mark.parametrize("library", sorted(WALLED))
def test_walled_libraries_stay_behind_their_wall(library: str) -> None:
    allowed = WALLED[library]
    outside = [f"{where(m, line)}: {m} imports {library}" for m, targets in EDGES.items()
               for found, line in targets.items()
               if found == library and not any(m == a or m.startswith(a + ".") for a in allowed)]
    assert not outside, f"only {allowed} may import {library}:\n" + "\n".join(sorted(outside))


def test_the_reader_sees_the_kinds_of_import() -> None:
    """The test reads function-local, relative, TYPE_CHECKING and class-path imports."""
    edges = EDGES
    assert "squall.topology.loading" in edges["squall.topology.component"]  # function-local
    assert "squall.windowing.stateful" not in edges.get("squall.state", {})  # an alias, left out
    assert "squall.tuning.autotune" in edges["squall.config"]  # a class path in a default
    assert "squall.local" in edges["squall"]  # a lazy export
    assert "squall.worker.executors.host" in edges["squall.worker.executors.executor"]  # under TYPE_CHECKING
    assert "kazoo" in edges["squall.cluster.zookeeper"]
    # a .pxd's cimport
    assert "squall.worker.executors.pending" in edges["squall.worker.executors.emit"]
