"""A topology's own dependencies, decided apart from files and processes.

``squall submit/local --requirements PATH`` names a pip requirements file
(a streamparse project's ``virtualenvs/NAME.txt``) or a ``pyproject.toml``
(its ``[project].dependencies``).  This module reads that text (the caller
reads the files), normalises it into the lines pip is given, drops what
Squall itself provides, and keys the environment by a content hash; it also
keeps a node's cache bookkeeping: which environments its topologies use,
which to remove once unused for a grace period, and when a failed build may
be tried again.  The builder (squall.runtime.envbuild) carries it out.

Normalised lines are what travels to the cluster: relative paths (a wheel, a
``--find-links`` directory, ``-e ./pkg``) are made absolute against the
requirements file's directory, since nimbus and the supervisors read them
from elsewhere; comments, blank lines and continuations are gone, so a
comment edited in the file does not rebuild anything.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from squall.errors import ConfigError, SquallError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the same parser, before it joined the standard library
    import tomli as tomllib

# Packages a topology never gets from its requirements: Squall's own streamparse
# compatibility layer stands in for them (a real one would shadow it in the env).
PROVIDED = {"streamparse": "provided by Squall (its streamparse compatibility layer)",
            "pystorm": "provided by Squall (its multilang adapter and streamparse layer)"}
MAX_TEXT = 64 * 1024  # of normalised requirements: they travel in the topology's record
# pip options whose value is a path when it is not a URL.
PATH_OPTIONS = {"-f", "--find-links", "-e", "--editable"}
# pip options a requirements file may hold (pip's own list), with whether they take a value.
OPTIONS = {"-i": True, "--index-url": True, "--extra-index-url": True, "--no-index": False,
           "-f": True, "--find-links": True, "--pre": False, "--trusted-host": True,
           "--prefer-binary": False, "--only-binary": True, "--no-binary": True,
           "-e": True, "--editable": True, "--use-feature": True, "--config-settings": True}
NESTED = {"-r", "--requirement"}
REFUSED = {"-c": "constraints files (-c) are Squall's own here: list the versions in the requirements",
           "--constraint": "constraints files (--constraint) are Squall's own here: list the versions in "
                           "the requirements"}
ARCHIVE = re.compile(r"\.(whl|tar\.gz|tgz|zip|tar\.bz2)$")
DIRECT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\s*(\[[^\]]*\])?\s*@")  # PEP 508's "name @ URL"


@dataclass(frozen=True)
class Requirements:
    """A topology's normalised requirements, what was dropped, and where they came from."""

    lines: tuple[str, ...]
    source: str = "requirements"
    notes: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines)

    @property
    def count(self) -> int:
        """How many packages are asked for (pip options are not counted)."""
        return sum(1 for line in self.lines
                   if not line.startswith("-") or _option(line)[0] in ("-e", "--editable"))

    def key(self, python: str, squall: str) -> str:
        """The environment's content hash: the lines, the Python that runs it and Squall's
        version (an upgrade of either builds afresh: Squall's dependencies are pinned in it)."""
        digest = hashlib.sha256(f"python {python}\nsquall {squall}\n".encode())
        digest.update(self.text.encode())
        return digest.hexdigest()

    def to_record(self) -> dict[str, Any]:
        return {"source": self.source, "lines": list(self.lines)}


def from_record(record: Any) -> Requirements | None:
    """What a submit or a topology record carries (``{"source", "lines"}``), checked again:
    the client's word is not taken for it.  None: no requirements."""
    if record is None:
        return None
    if not isinstance(record, Mapping) or not isinstance(record.get("lines"), list) \
            or not all(isinstance(line, str) for line in record["lines"]):
        msg = "'requirements' must be {\"source\": str, \"lines\": [str, ...]}"
        raise SquallError(msg)
    source = str(record.get("source") or "requirements")
    parsed = parse_requirements("\n".join(record["lines"]), None, source)
    return parsed if parsed.lines else None


def read(name: str, text: str, base_dir: str | None,
         read_file: Callable[[str], str] | None = None) -> Requirements:
    """``text`` of the file ``name``: a ``pyproject.toml`` or a pip requirements file."""
    if PurePosixPath(name).name == "pyproject.toml":
        return parse_pyproject(text, name)
    return parse_requirements(text, base_dir, name, read_file)


def parse_pyproject(text: str, source: str = "pyproject.toml") -> Requirements:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = f"{source}: not valid TOML: {e}"
        raise SquallError(msg) from e
    project = data.get("project")
    if not isinstance(project, dict):
        msg = f"{source}: no [project] table, so no [project].dependencies to install"
        raise SquallError(msg)
    deps = project.get("dependencies")
    if deps is None and "dependencies" in (project.get("dynamic") or []):
        msg = f"{source}: [project].dependencies is dynamic; list them in a requirements file instead"
        raise SquallError(msg)
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        msg = f"{source}: [project].dependencies must be a list of requirement strings"
        raise SquallError(msg)
    return parse_requirements("\n".join(deps), None, source)


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """(line number, line) with comments cut (pip's rule: '#' at the start or after
    whitespace), continuations joined and blank lines gone."""
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        if not pending:
            start = number
        line = raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        line = " ".join(re.sub(r"(^|\s)#.*$", "", pending + line).split())
        pending = ""
        if line:
            yield start, line
    tail = " ".join(re.sub(r"(^|\s)#.*$", "", pending).split())
    if tail:
        yield start, tail


def _option(line: str) -> tuple[str, str]:
    """``--find-links=DIR``, ``--find-links DIR`` or ``-fDIR`` as (option, value)."""
    if line.startswith("--"):
        name, sep, value = line.partition("=")
        if not sep:
            name, _, value = line.partition(" ")
        return name.strip(), value.strip()
    name, value = line[:2], line[2:].strip()
    return name, value


def _is_url(value: str) -> bool:
    return bool(re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", value))


def _absolute(value: str, base_dir: str | None, where: str) -> str:
    if _is_url(value) or value.startswith("/"):
        return value
    if value.startswith("~"):
        msg = f"{where}: {value!r}: a path starting with ~ means another home on the cluster; give it in full"
        raise SquallError(msg)
    if base_dir is None:
        msg = f"{where}: {value!r} is a relative path, and nothing says relative to what"
        raise SquallError(msg)
    return posixpath.normpath(posixpath.join(base_dir, value))


def _looks_like_path(spec: str) -> bool:
    if DIRECT.match(spec):  # "name @ https://.../name-1.0-py3-none-any.whl": a URL, named
        return False
    return spec.startswith((".", "/", "~")) or bool(ARCHIVE.search(spec.split(";")[0].strip()))


def _name_of(spec: str) -> str | None:
    """The project a requirement line installs, when it says (a path's wheel name does)."""
    if _looks_like_path(spec):
        stem = PurePosixPath(spec.split(";")[0].strip()).name
        return canonicalize_name(stem.split("-")[0]) if ARCHIVE.search(stem) else None
    try:
        return canonicalize_name(Requirement(spec).name)
    except InvalidRequirement:
        return None


def parse_requirements(text: str, base_dir: str | None, source: str = "requirements",
                       read_file: Callable[[str], str] | None = None,
                       _seen: tuple[str, ...] = ()) -> Requirements:
    """Normalise a requirements file's ``text``.  ``base_dir``: its directory, which
    relative paths are taken from (None: none may be relative); ``read_file``: reads
    a ``-r`` file it names (None: ``-r`` is refused), whose lines are taken in."""
    lines: list[str] = []
    notes: list[str] = []
    for number, line in _logical_lines(text):
        where = f"{source}, line {number}"
        if line.startswith("-"):
            name, value = _option(line)
            if name in REFUSED:
                msg = f"{where}: {REFUSED[name]}"
                raise SquallError(msg)
            if name in NESTED:
                if read_file is None or not value:
                    msg = f"{where}: {line!r}: a nested requirements file cannot be read here"
                    raise SquallError(msg)
                path = _absolute(value, base_dir, where)
                if path in _seen:
                    msg = f"{where}: {value!r} includes itself"
                    raise SquallError(msg)
                nested = parse_requirements(read_file(path), str(PurePosixPath(path).parent), path,
                                            read_file, (*_seen, path))
                lines += nested.lines
                notes += nested.notes
                continue
            if name not in OPTIONS:
                msg = f"{where}: {line!r}: pip option {name!r} is not one a requirements file may hold here"
                raise SquallError(msg)
            if OPTIONS[name] and not value:
                msg = f"{where}: {name} needs a value"
                raise SquallError(msg)
            if name in PATH_OPTIONS:
                value = _absolute(value, base_dir, where)
            lines.append(f"{name} {value}" if OPTIONS[name] else name)
            continue
        spec, _, per_requirement = line.partition(" --")  # --hash=..., kept as they are
        spec = spec.strip()
        name = _name_of(spec)
        if name is None and not _looks_like_path(spec) and not _is_url(spec):
            msg = f"{where}: {spec!r} is not a requirement pip understands (name, version, path or URL)"
            raise SquallError(msg)
        if name in PROVIDED:
            notes.append(f"{spec}: {PROVIDED[name]}; not installed")
            continue
        if _looks_like_path(spec):
            spec = _absolute(spec, base_dir, where)
        lines.append(spec + (f" --{per_requirement}" if per_requirement else ""))
    parsed = Requirements(tuple(lines), source, tuple(notes))
    if len(parsed.text) > MAX_TEXT:
        msg = f"{source}: {len(parsed.text)} bytes of requirements, over {MAX_TEXT}"
        raise SquallError(msg)
    return parsed


def pins(roots: Iterable[str], installed: Mapping[str, tuple[str, Iterable[str]]]) -> list[str]:
    """``name==version`` of ``roots`` and everything they depend on, as ``installed``
    (canonical name -> (version, its requirement strings, markers already decided))
    has them: the constraints that keep an environment from replacing what Squall runs on."""
    out: dict[str, str] = {}
    todo = [canonicalize_name(r) for r in roots]
    while todo:
        name = todo.pop()
        if name in out or name not in installed:
            continue
        version, requires = installed[name]
        out[name] = version
        for spec in requires:
            try:
                todo.append(canonicalize_name(Requirement(spec).name))
            except InvalidRequirement:
                continue
    return [f"{name}=={out[name]}" for name in sorted(out)]


# -- a node's cache ------------------------------------------------------------------


@dataclass
class EnvCache:
    """Which cached environments a node keeps.  The shell tells it what is on disk and
    which topologies use which environment; it answers what to remove (unused for
    ``grace_secs``), and whether a failed build may be tried again (backoff doubling
    from ``retry_secs`` up to ``max_retry_secs``)."""

    grace_secs: float
    retry_secs: float = 5.0
    max_retry_secs: float = 300.0
    unused_since: dict[str, float] = field(default_factory=dict)
    failures: dict[str, tuple[int, float]] = field(default_factory=dict)  # key -> (count, next try)

    def sweep(self, present: Iterable[str], in_use: Mapping[str, Iterable[str]], now: float) -> list[str]:
        """The environments to remove now, of those ``present``; ``in_use``: key -> the
        topologies using it (an empty collection counts as unused)."""
        used = {key for key, users in in_use.items() if any(True for _ in users)}
        present = set(present)
        remove = []
        for key in sorted(present):
            if key in used:
                self.unused_since.pop(key, None)
                continue
            since = self.unused_since.setdefault(key, now)
            if now - since >= self.grace_secs:
                remove.append(key)
        for key in set(self.unused_since) - (present - set(remove)):
            del self.unused_since[key]
        return remove

    def may_build(self, key: str, now: float) -> bool:
        failed = self.failures.get(key)
        return failed is None or now >= failed[1]

    def build_failed(self, key: str, now: float) -> float:
        """Note a failed build; the seconds until the next try."""
        count = self.failures.get(key, (0, 0.0))[0] + 1
        wait = min(self.retry_secs * 2 ** (count - 1), self.max_retry_secs)
        self.failures[key] = (count, now + wait)
        return wait

    def built(self, key: str) -> None:
        self.failures.pop(key, None)


# -- what a cluster builds ----------------------------------------------------------------

# Building an environment may run code the submitter chose (an sdist's build backend, a
# checkout's setup.py): a cluster builds wheels from its own index unless its admin lists
# more in squall.env.build.allow.  Each kind, as a refusal names it.
BUILD_KINDS = {
    "sdist": "a source distribution or source tree, whose build runs its own code",
    "url": "a package from a URL of its own",
    "vcs": "a package from a version-control checkout",
    "index": "an index or link page of its own",
    "editable": "an editable install, built from its source in place",
}
ALLOW_KEY = "squall.env.build.allow"
PATHS_KEY = "squall.env.build.paths"
INDEX_OPTIONS = {"-i", "--index-url", "--extra-index-url", "--trusted-host"}
VCS = re.compile(r"^(git|hg|svn|bzr)\+", re.IGNORECASE)


@dataclass(frozen=True)
class BuildPolicy:
    """What a cluster's daemons build, from their own conf (never a topology's):
    ``allow``, kinds of :data:`BUILD_KINDS`; ``paths``, directories a requirement's
    local path (a wheel, a ``--find-links`` directory, a source) must lie under."""

    allow: frozenset[str] = frozenset()
    paths: tuple[str, ...] = ()

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> BuildPolicy:
        allow, paths = conf.get(ALLOW_KEY) or [], conf.get(PATHS_KEY) or []
        if not isinstance(allow, list) or not all(k in BUILD_KINDS for k in allow):
            msg = f"config {ALLOW_KEY!r} lists kinds of {sorted(BUILD_KINDS)}, got {allow!r}"
            raise ConfigError(msg)
        if not isinstance(paths, list) or not all(isinstance(p, str) and p.startswith("/") for p in paths):
            msg = f"config {PATHS_KEY!r} must list absolute directories, got {paths!r}"
            raise ConfigError(msg)
        return cls(frozenset(allow), tuple(posixpath.normpath(p) for p in paths))

    def pip_options(self) -> list[str]:
        """What pip is told besides the requirements: no source builds of what the index
        serves (dependencies included) unless sdists are allowed."""
        return [] if "sdist" in self.allow else ["--only-binary=:all:"]

    def check(self, requirements: Requirements) -> tuple[str, ...]:
        """The local paths ``requirements`` name (what a build's sandbox must show), or a
        SquallError naming the first line refused and the key that would allow it."""
        named: list[str] = []
        for number, line in enumerate(requirements.lines, 1):
            kinds, paths = needs(line)
            where = f"{requirements.source}, requirement {number}: {line!r}"
            for kind in sorted(kinds - self.allow):
                msg = (f"{where} is {BUILD_KINDS[kind]}; this cluster builds only wheels from its index "
                       f"unless its admin lists {kind!r} in {ALLOW_KEY} (the cluster's conf)")
                raise SquallError(msg)
            for path in paths:
                if not any(path == d or path.startswith(d.rstrip("/") + "/") for d in self.paths):
                    msg = (f"{where} names {path}, which is not under a directory the cluster's "
                           f"{PATHS_KEY} lists")
                    raise SquallError(msg)
                named.append(path)
        return tuple(dict.fromkeys(named))


def needs(line: str) -> tuple[set[str], list[str]]:
    """What a normalised requirement line asks of the build: kinds of :data:`BUILD_KINDS`
    and local paths (normalised; a ``file:`` URL is its path)."""
    if line.startswith("-"):
        name, value = _option(line)
        if name in INDEX_OPTIONS:
            return {"index"}, []
        if name == "--no-binary":
            return {"sdist"}, []
        if name in ("-f", "--find-links"):
            return _source(value, link_page=True)
        if name in ("-e", "--editable"):
            kinds, paths = _source(value)
            return {"editable", *(kinds - {"sdist"})}, paths
        return set(), []
    # The requirement without its options (--hash=...) or markers ("; python_version < '3.12'").
    spec = re.split(r"\s*;\s+|\s+;\s*", line.partition(" --")[0].strip())[0]
    try:
        url = Requirement(spec).url  # "name @ URL"
    except InvalidRequirement:
        url = None
    if url:
        return _source(url)
    return _source(spec) if _is_url(spec) or _looks_like_path(spec) else (set(), [])


def _source(value: str, link_page: bool = False) -> tuple[set[str], list[str]]:
    """A URL's or path's kinds: a wheel is fine where it may be; anything else is built
    (a link page, ``--find-links``, is only read: its sdists are refused by pip's options)."""
    if VCS.match(value):
        return {"vcs"}, []
    target = value.split("#")[0].split("?")[0]
    built = set() if link_page or target.endswith(".whl") else {"sdist"}
    if target.lower().startswith("file:"):
        path = unquote(re.sub(r"^file:(//[^/]*)?", "", target, flags=re.IGNORECASE))
        return built, [posixpath.normpath("/" + path.lstrip("/"))]
    if _is_url(target):
        return ({"index"} if link_page else {"url"}) | built, []
    return built, [posixpath.normpath(target.split(";")[0].strip())]
