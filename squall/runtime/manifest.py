"""What a topology's code package holds: the topology file, the user's own
modules it imports, its shell components' resources, and what an include
list adds -- each file with the reason it is there.

Storm ships a jar of what the build put in it; Squall has no build, so it
traces the imports.  A module goes in when its file lies under the project
root (the topology file's directory unless told otherwise) and outside
Python's own library, site-packages, virtualenvs and Squall itself.  Two
sources are merged, because each misses what the other sees:

- the modules the submitting process really imported while it loaded the
  topology (``modules``, from ``sys.modules``): they include classes a Flux
  file or a transactional topology names only as ``"module:Class"`` strings,
  and anything imported through ``importlib``;
- a static scan (the standard library's ``modulefinder``) of the topology
  file and of every packed module, which also sees the imports inside
  functions that only run on a worker.

A module is packed at the path its dotted name implies (``bolts.count`` at
``bolts/count.py``) with the ``__init__`` of each package above it, because
workers put the unpacked package first on ``sys.path`` and import it by
that name.  Everything else -- resources and included files -- is packed
at its path relative to the root, where workers run.

Data files travel only by name: ``include`` patterns are globs relative to
the root (``*.csv`` at the top, ``**/*.csv`` anywhere, ``data`` a whole
directory); a glob leaves out dotfiles, VCS and virtualenv directories and
private-key-looking files, and a pattern naming one file exactly ships it
whatever it is (a CA certificate a bolt needs).  A pattern that matches
nothing is an error naming it.

:func:`code_manifest` reads files and nothing else (it imports no user
code), so it can be tested on a directory tree; the CLI passes it what the
process imported and packs the result (squall.runtime.package).
"""

from __future__ import annotations

import fnmatch
import modulefinder
import os
import site
import stat
import sys
import sysconfig
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from squall.errors import SquallError

# Never user code, besides every dot-directory and any virtualenv (a directory holding pyvenv.cfg).
SKIP_DIRS = {"__pycache__", "node_modules", "squall-local", "venv", "site-packages", "CVS", "_darcs", "_MTN"}
SECRET_FILES = ("id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", "*.pem", "*.key", "*.p12", "*.pfx",
                "*.jks", "*.keystore", "keyring.json")
SQUALL_DIR = Path(__file__).resolve().parents[1]

# Why a file is in the package.
TOPOLOGY, IMPORTED, PACKAGE, RESOURCE, INCLUDED = "topology", "imported", "package", "resource", "included"


@dataclass(frozen=True)
class Entry:
    """One file of the package: where it goes, how big, why, and where it is read from."""

    path: str  # inside the package, '/'-separated
    size: int
    why: str  # TOPOLOGY, IMPORTED, PACKAGE, RESOURCE or INCLUDED
    detail: str  # the module's name, the components (", "-separated), the include pattern
    source: Path


@dataclass(frozen=True)
class Resource:
    """A file or directory a shell component runs with (a directory is packed whole)."""

    path: Path
    component: str


# -- what is not the user's code ---------------------------------------------


def _skip_dir(path: Path) -> bool:
    return path.name.startswith(".") or path.name in SKIP_DIRS or (path / "pyvenv.cfg").exists()


def _skip_file(name: str) -> bool:
    return name.startswith(".") or any(fnmatch.fnmatchcase(name, p) for p in SECRET_FILES)


def _under(path: Path, directory: Path) -> bool:
    return path == directory or directory in path.parents


def _library_dirs() -> list[Path]:
    """Python's own library and every site-packages: installed code, never packed."""
    names = ("stdlib", "platstdlib", "purelib", "platlib")
    dirs = {sysconfig.get_paths()[n] for n in names}
    dirs.update(site.getsitepackages())
    dirs.add(site.getusersitepackages())
    dirs.update({sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix} - {"/", "/usr"})
    return [Path(d).resolve() for d in dirs if d]


class _Project:
    """The root, and what under it is the user's own code."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.libraries = [d for d in _library_dirs() if not _under(root, d)] + [SQUALL_DIR]

    def owns(self, file: str | Path) -> bool:
        """A regular file under the root, in no library, virtualenv, dot- or cache directory."""
        path = Path(os.path.abspath(file))
        if not _under(path, self.root) or path == self.root or not path.is_file():
            return False
        real = path.resolve()
        if any(_under(path, lib) or _under(real, lib) for lib in self.libraries):
            return False
        return not any(_skip_dir(d) for d in path.parents if d != self.root and _under(d, self.root))

    def relative(self, path: Path) -> str:
        return Path(os.path.abspath(path)).relative_to(self.root).as_posix()

    def walk(self, directory: Path) -> Iterator[Path]:
        """Files under ``directory`` a glob may pack: no dotfiles, keys, caches, virtualenvs,
        nor symlinks leading out of the root."""
        for dirpath, dirnames, filenames in os.walk(directory):
            here = Path(dirpath)
            dirnames[:] = sorted(d for d in dirnames if not _skip_dir(here / d))
            for name in sorted(filenames):
                if not _skip_file(name) and self.contains(here / name):
                    yield here / name

    def contains(self, path: Path) -> bool:
        """A regular file whose real path is under the root (a symlink may not lead out)."""
        try:
            real = path.resolve(strict=True)
            return self.root.resolve() in real.parents and stat.S_ISREG(real.stat().st_mode)
        except OSError:
            return False


# -- imports ----------------------------------------------------------------------


class _Finder(modulefinder.ModuleFinder):
    """modulefinder that reads only the project's files: a library module is
    noted (so its submodules resolve) but never compiled or scanned."""

    def __init__(self, project: _Project, path: list[str]) -> None:
        super().__init__(path)
        self.project = project

    def load_module(self, fqname: str, fp: Any, pathname: str, file_info: tuple[str, str, int]) -> Any:
        kind = file_info[2]
        if kind == modulefinder._PKG_DIRECTORY or (pathname and self.project.owns(pathname)):
            try:
                return super().load_module(fqname, fp, pathname, file_info)
            except (SyntaxError, ValueError):
                pass  # it fails on the worker as it would here; packed, not scanned
        module = self.add_module(fqname)
        module.__file__ = pathname
        return module

    def find_module(self, name: str, path: Any, parent: Any = None) -> Any:
        try:
            return super().find_module(name, path, parent)
        except (TypeError, AttributeError, ValueError) as e:
            # A namespace package (no file) or a loader modulefinder does not know:
            # left to what the process itself imported.
            raise ImportError(name) from e


def _scan(project: _Project, path: list[str], files: Iterable[Path] = (),
          names: Mapping[str, str] | None = None) -> dict[str, str]:
    """Name -> file of every module that ``files`` (run as scripts) and the modules ``names``
    import, statically and through the project's own modules only."""
    finder = _Finder(project, path)
    for file in files:
        try:
            finder.load_file(str(file))
        except (OSError, SyntaxError, ValueError):
            continue
    for name, file in sorted((names or {}).items()):
        try:
            finder.import_hook(name)
        except (ImportError, OSError):
            pass
        found = finder.modules.get(name)
        if (found is None or not found.__file__) and "." not in name:
            try:  # found by the process some other way: read by its file, under its name
                finder.load_file(file)
            except (OSError, SyntaxError, ValueError):
                continue
    return {name: m.__file__ for name, m in finder.modules.items() if m.__file__}


def _module_path(name: str, file: str) -> str:
    """Where a worker importing ``name`` from the package's top finds it."""
    parts = name.split(".")
    base = os.path.basename(file)
    package = base.startswith("__init__.")
    return "/".join([*(parts if package else parts[:-1]), base])


def loaded_modules() -> dict[str, str]:
    """Name -> file of every module this process has imported (what :func:`code_manifest`'s
    ``modules`` takes, once the topology and its classes are loaded)."""
    return {name: file for name, module in list(sys.modules.items())
            if isinstance(file := getattr(module, "__file__", None), str)}


# -- include patterns -----------------------------------------------------------


def _pattern(pattern: str) -> tuple[str, ...]:
    pure = PurePosixPath(pattern.strip())
    if not pattern.strip() or pure.is_absolute() or ".." in pure.parts:
        msg = f"package include pattern {pattern!r} must be a relative glob inside the project root"
        raise SquallError(msg)
    return tuple(p for p in pure.parts if p != ".")


def _glob_match(pattern: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_glob_match(pattern[1:], parts[i:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], pattern[0]) and _glob_match(pattern[1:], parts[1:])


def _matches(project: _Project, pattern: str) -> list[Path]:
    """The files ``pattern`` names: an exact file as it is, else what the walk keeps that the
    glob matches (a matched directory: all of it)."""
    parts = _pattern(pattern)
    literal = project.root.joinpath(*parts)
    if not any(c in pattern for c in "*?[") and literal.is_file():
        return [literal] if project.contains(literal) else []
    found = []
    for path in project.walk(project.root):
        rel = path.relative_to(project.root).parts
        if any(_glob_match(parts, rel[:k]) for k in range(1, len(rel) + 1)):
            found.append(path)
    return found


# -- the manifest -----------------------------------------------------------------


class _Builder:
    def __init__(self, project: _Project) -> None:
        self.project = project
        self.entries: dict[str, Entry] = {}

    def add(self, path: str, source: Path, why: str, detail: str) -> bool:
        here = self.entries.get(path)
        if here is not None:
            if os.path.realpath(here.source) != os.path.realpath(source):
                msg = (f"two files would be packed as {path}: {here.source} ({here.why} {here.detail}) "
                       f"and {source} ({why} {detail})")
                raise SquallError(msg)
            if here.why == why == RESOURCE and detail not in here.detail.split(", "):
                # one resources/ directory, several components
                self.entries[path] = Entry(path, here.size, why, f"{here.detail}, {detail}", here.source)
            return False
        self.entries[path] = Entry(path, source.stat().st_size, why, detail, source)
        return True

    def add_modules(self, modules: Mapping[str, str]) -> None:
        for name in sorted(modules):
            file = modules[name]
            if name == "__main__" or not self.project.owns(file):
                continue
            self.add(_module_path(name, file), Path(os.path.abspath(file)), IMPORTED, name)
            # The packages above it, wherever their __init__ is: the import needs them.
            parts = name.split(".")
            for k in range(1, len(parts)):
                parent = ".".join(parts[:k])
                init = modules.get(parent)
                if init and os.path.basename(init).startswith("__init__.") and not any(
                        _under(Path(os.path.abspath(init)), lib) for lib in self.project.libraries):
                    self.add(_module_path(parent, init), Path(os.path.abspath(init)), PACKAGE, parent)

    def add_tree(self, path: Path, why: str, detail: str) -> None:
        files = self.project.walk(path) if path.is_dir() else [path] if self.project.contains(path) else []
        for file in files:
            self.add(self.project.relative(file), file, why, detail)


def code_manifest(topology_file: str | Path, root: str | Path | None = None, include: Iterable[str] = (), *,
                  modules: Mapping[str, str] | None = None, resources: Iterable[Resource] = (),
                  search_path: list[str] | None = None) -> list[Entry]:
    """The files of ``topology_file``'s code package, sorted by path.

    ``root``: the project's root (default: the topology file's directory);
    ``include``: patterns of more files; ``modules``: name -> file of modules
    the topology's process imported (:func:`loaded_modules`); ``resources``:
    what its shell components run; ``search_path``: where imports are looked
    for (default: the topology file's directory, then ``sys.path``).
    """
    file = Path(os.path.abspath(topology_file))
    project = _Project(Path(os.path.abspath(root if root is not None else file.parent)))
    if not project.root.is_dir():
        msg = f"the project root {project.root} is not a directory"
        raise SquallError(msg)
    if not _under(file, project.root):
        msg = f"the topology file {file} is not under the project root {project.root}"
        raise SquallError(msg)
    search = [str(file.parent), *(sys.path if search_path is None else search_path)]
    built = _Builder(project)
    python = file.suffix == ".py"
    if python:
        # Imported by its file name (squall.cli.args.load_topology), so found at the top.
        built.add(file.name, file, TOPOLOGY, file.stem)
    # What the process imported, and what a static scan of the topology and of those of
    # its modules that are the project's finds (imports inside functions, too).
    known = {name: path for name, path in (modules or {}).items()
             if name != "__main__" and not (python and name == file.stem)}
    mine = {name: path for name, path in known.items() if project.owns(path)}
    scanned = _scan(project, search, [file] if python else [], mine)
    scanned.pop(file.stem if python else "", None)
    built.add_modules({**scanned, **known})
    for resource in resources:
        _add_resource(built, resource, search)
    for pattern in include:
        matched = _matches(project, pattern)
        if not matched:
            msg = f"package include {pattern!r} matches no file under {project.root}"
            raise SquallError(msg)
        for path in matched:
            built.add(project.relative(path), path, INCLUDED, pattern)
    return [built.entries[p] for p in sorted(built.entries)]


def _add_resource(built: _Builder, resource: Resource, search: list[str]) -> None:
    path = Path(os.path.abspath(resource.path))
    project = built.project
    detail = resource.component
    if not _under(path, project.root) or path == project.root:
        msg = f"component {resource.component!r}: {path} is outside the project root {project.root}"
        raise SquallError(msg)
    built.add_tree(path, RESOURCE, detail)
    if path.is_file() and path.suffix == ".py":
        # A Python child imports from its own directory: what it needs from the project goes too.
        scanned = _scan(project, [str(path.parent), *search], [path])
        for name, file in scanned.items():
            if name != path.stem and project.owns(file):
                built.add(project.relative(Path(file)), Path(os.path.abspath(file)), RESOURCE, detail)


def outside(modules: Mapping[str, str], root: str | Path) -> dict[str, str]:
    """Name -> file of imported modules that are neither the project's (under ``root``)
    nor installed (a library, site-packages, Squall): the cluster will not have them."""
    project = _Project(Path(os.path.abspath(root)))
    out = {}
    for name, file in modules.items():
        path = Path(os.path.abspath(file))
        if name == "__main__" or _under(path, project.root) or not path.is_file():
            continue
        if any(_under(path, lib) or _under(path.resolve(), lib) for lib in project.libraries):
            continue
        if any(_skip_dir(d) for d in path.parents if d != Path(path.anchor)):
            continue  # inside a virtualenv or a dot-directory: installed somewhere, not written here
        out[name] = file
    return out
