"""Building the hot path's Cython modules (see squall/compiled/__init__.py)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from squall.compiled import (
    BUILD_DIR,
    DIRECTIVES,
    MODULES,
    PACKAGE_DIR,
    PURE_ENV,
    SUFFIX,
    build_path,
    declarations,
    enabled,
    source_of,
)


def stale() -> list[str]:
    return [m for m in MODULES if (p := build_path(m)) is not None and not p.is_file()]


def build(jobs: int = 2) -> list[str]:
    """Compile the modules whose build is missing or stale; remove outdated builds.

    Returns the modules built.  Raises ImportError without Cython, and the
    compiler's error if a module does not compile.
    """
    todo = stale()
    BUILD_DIR.mkdir(exist_ok=True)
    if todo:
        from Cython.Build import cythonize
        from setuptools import Distribution

        with tempfile.TemporaryDirectory(prefix="squall-compile-") as tmp:
            root = Path(tmp)
            sources = []
            for pxd in declarations():  # what the typed modules cimport, where Cython looks for it
                target = root / pxd.relative_to(PACKAGE_DIR.parent)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(pxd, target)
            for module in todo:
                # A copy in its package tree: Cython names the module by its
                # package path, and the checkout gets no .c files.
                target = root.joinpath(*module.split(".")).with_suffix(source_of(module).suffix)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source_of(module), target)
                for parent in target.relative_to(root).parents:
                    if parent != Path("."):
                        (root / parent / "__init__.py").touch()
                sources.append(str(target.relative_to(root)))
            cwd = os.getcwd()
            os.chdir(root)
            try:
                extensions = cythonize(sources, compiler_directives=DIRECTIVES, quiet=True, nthreads=jobs)
                dist = Distribution({"ext_modules": extensions})
                cmd = dist.get_command_obj("build_ext")
                cmd.inplace = True
                cmd.parallel = jobs
                dist.run_command("build_ext")
            finally:
                os.chdir(cwd)
            for module in todo:
                built = root.joinpath(*module.split(".")).with_suffix(SUFFIX)
                target = build_path(module)
                assert target is not None
                tmp_target = target.with_name(target.name + ".tmp")
                shutil.copyfile(built, tmp_target)
                tmp_target.replace(target)  # whole or not at all: a worker may be importing it
    current = {build_path(m) for m in MODULES}
    for old in BUILD_DIR.glob(f"*{SUFFIX}"):
        if old not in current:
            old.unlink(missing_ok=True)
    return todo


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    command = args[0] if args else "status"
    if command == "build":
        try:
            built = build()
        except ImportError as e:
            print(f"squall.compiled: not building ({e}); Squall runs as pure Python", file=sys.stderr)
            return 1
        print(f"squall.compiled: built {len(built)}, up to date {len(MODULES) - len(built)} "
              f"of {len(MODULES)} hot-path modules")
        return 0
    if command == "status":
        missing = stale()
        for module in MODULES:
            print(f"{module:<40} {'stale or not built' if module in missing else 'built'}")
        print(f"pure Python forced by {PURE_ENV}" if not enabled() else "builds are used when current")
        return 0
    print("usage: python -m squall.compiled [build|status]", file=sys.stderr)
    return 2
