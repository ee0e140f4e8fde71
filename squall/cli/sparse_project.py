"""A streamparse project as ``squall sparse`` reads it: ``config.json``, the topology files
under its ``topology_specs`` directory, the requirements under ``virtualenv_specs``, and the
environment (``envs``) a command picks -- turned into what Squall's own commands take.

streamparse runs its commands from the project's directory, reaches Storm over SSH and
builds virtualenvs on every worker machine with fabric.  Squall ships the code and builds
the virtualenv through nimbus and the supervisors, so an environment's SSH and virtualenv
settings have no meaning here: :func:`unused_settings` names them, and the commands say so
once instead of ignoring them silently.  Reads files only: no network, no Squall daemon.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from squall.errors import SquallError

CONFIG_FILE = "config.json"

# config.json's environment settings that are about SSH and fabric, and what Squall does
# instead (the notes `squall sparse` prints).
ELSEWHERE = {
    "user": "no SSH: nimbus and the supervisors ship the code",
    "ssh_password": "no SSH: nimbus and the supervisors ship the code",
    "ssh_port": "no SSH: nimbus and the supervisors ship the code",
    "use_ssh_for_nimbus": "no SSH: the CLI reaches nimbus over HTTPS with squall.yaml's token",
    "workers": "the supervisors register themselves in ZooKeeper",
    "virtualenv_root": "each supervisor builds the topology's virtualenv in its local dir",
    "use_virtualenv": "a topology runs in a virtualenv when it has requirements",
    "install_virtualenv": "each supervisor builds the topology's virtualenv in its local dir",
    "virtualenv_flags": "virtualenvs are built by pip from the requirements file alone",
    "log": "worker logs are the supervisors' (squall logs, the logviewer); levels: squall set_log_level",
    "log_path": "worker logs are the supervisors' (squall logs, the logviewer)",
    "log_file": "worker logs are the supervisors' (squall logs, the logviewer)",
    "serializer": "Python components run in the worker's process: nothing is serialized to them",
    "nimbus": "the CLI finds nimbus in squall.yaml (--config, $SQUALL_CONF, or the running dev "
              "cluster; an environment's own: \"squall_config\")",
    "ui.port": "the UI is nimbus's (ui.port in squall.yaml)",
}


@dataclass
class Project:
    root: Path
    config: dict[str, Any]

    @property
    def topology_dir(self) -> Path:
        return self.root / str(self.config.get("topology_specs") or "topologies/")

    @property
    def requirements_dir(self) -> Path:
        return self.root / str(self.config.get("virtualenv_specs") or "virtualenvs/")

    @property
    def source_dir(self) -> Path:
        """Where the components' modules live: ``src/`` (streamparse packs it as the jar's root)."""
        return self.root / "src"


@dataclass
class Invocation:
    """What one ``squall sparse`` command runs: the topology file, its name, the config
    overrides (streamparse's precedence resolved), the requirements file, the squall.yaml of
    the environment, and the notes to print."""

    name: str
    file: Path
    conf: dict[str, Any] = field(default_factory=dict)
    requirements: Path | None = None
    squall_config: str | None = None
    notes: list[str] = field(default_factory=list)


def load_project(directory: str | Path = ".", config_file: str | None = None) -> Project:
    """The project whose ``config.json`` is ``config_file`` (default: in ``directory``)."""
    path = Path(config_file) if config_file else Path(directory) / CONFIG_FILE
    if not path.is_file():
        msg = (f"no {path} here: `squall sparse` runs in a streamparse project's directory (one "
               "with config.json; `squall sparse quickstart NAME` makes one), or pass --config")
        raise SquallError(msg)
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        msg = f"{path} is not readable JSON: {e}"
        raise SquallError(msg) from e
    if not isinstance(config, dict):
        msg = f"{path} must hold a JSON object, not {type(config).__name__}"
        raise SquallError(msg)
    return Project(path.resolve().parent, config)


def topology_file(project: Project, name: str | None) -> tuple[str, Path]:
    """The topology ``name`` (the one there is, when None) and its file, as streamparse finds them."""
    directory = project.topology_dir
    if name is None:
        found = sorted(directory.glob("*.py"))
        found = [f for f in found if f.name != "__init__.py"]
        if not found:
            msg = f"no topology definitions in {directory}"
            raise SquallError(msg)
        if len(found) > 1:
            names = ", ".join(f.stem for f in found)
            msg = f"{directory} holds several topologies ({names}): name one with -n NAME"
            raise SquallError(msg)
        return found[0].stem, found[0]
    file = directory / f"{name}.py"
    if not file.is_file():
        here = ", ".join(sorted(f.stem for f in directory.glob("*.py"))) or "none"
        msg = f"no topology definition {file} (topologies here: {here})"
        raise SquallError(msg)
    return name, file


def environment(project: Project, env_name: str | None) -> tuple[str | None, dict[str, Any]]:
    """The environment a command uses: the named one, or the only one; none at all is fine
    for ``run`` (streamparse needs one only to reach a cluster)."""
    envs = project.config.get("envs") or {}
    if not isinstance(envs, dict):
        msg = f"config.json's envs must be an object of environments, not {envs!r}"
        raise SquallError(msg)
    if env_name is None:
        if len(envs) > 1:
            msg = f"config.json has several environments ({', '.join(sorted(envs))}): pick one with -e ENV"
            raise SquallError(msg)
        if not envs:
            return None, {}
        env_name = next(iter(envs))
    if env_name not in envs:
        msg = f"no environment {env_name!r} in config.json (it has: {', '.join(sorted(envs)) or 'none'})"
        raise SquallError(msg)
    env = envs[env_name]
    if not isinstance(env, dict):
        msg = f"config.json's environment {env_name!r} must be an object, not {env!r}"
        raise SquallError(msg)
    return env_name, env


def unused_settings(env: dict[str, Any]) -> list[str]:
    """A note for each setting of ``env`` with no meaning on Squall (set, not empty)."""
    notes = []
    for key, why in ELSEWHERE.items():
        value = env.get(key)
        if key == "log" and isinstance(value, dict):
            value = value.get("path")  # the rest (sizes, level) is quickstart's default: said nothing of
        if value in (None, "", [], {}):
            continue
        notes.append(f"config.json: {key!r} has no meaning on Squall ({why})")
    return notes


def parse_options(pairs: list[str] | None) -> dict[str, Any]:
    """``-o key=value`` pairs, each value read as YAML (as streamparse reads them)."""
    from squall.cli.args import parse_conf

    return parse_conf(list(pairs or []), flag="-o")


def invocation(project: Project, name: str | None, env_name: str | None, options: dict[str, Any],
               *, local: bool = False, requirements: list[str] | None = None,
               override_name: str | None = None) -> Invocation:
    """A command's topology, conf and requirements.  Conf precedence is streamparse's: the
    environment's ``options`` under the topology's own ``config`` (which Squall applies
    itself) under the command line's.  ``run`` (``local``) runs one worker, with one acker
    unless acking is off, as streamparse's local run does."""
    topology_name, file = topology_file(project, name)
    env_name, env = environment(project, env_name)
    conf: dict[str, Any] = {}
    env_options = env.get("options") or {}
    if not isinstance(env_options, dict):
        msg = f"config.json's environment {env_name!r}: options must be an object of topology settings"
        raise SquallError(msg)
    conf.update(env_options)
    conf.update(options)
    if local:
        conf["topology.workers"] = 1
        if conf.get("topology.acker.executors") != 0:
            conf["topology.acker.executors"] = 1
    notes = unused_settings(env)
    req = _requirements(project, topology_name, requirements, notes)
    return Invocation(override_name or topology_name, file, conf, req,
                      squall_config_of(project, env_name, env), notes)


def squall_config_of(project: Project, env_name: str | None, env: dict[str, Any]) -> str | None:
    """The squall.yaml an environment names (``squall_config``, relative to the project), if any."""
    given = env.get("squall_config")
    if given is not None and not isinstance(given, str):
        msg = f"config.json's environment {env_name!r}: squall_config must be the path of a squall.yaml"
        raise SquallError(msg)
    return str((project.root / given).resolve()) if given else None


def _requirements(project: Project, name: str, given: list[str] | None, notes: list[str]) -> Path | None:
    """The requirements file: ``-r`` (one; streamparse takes several, joined here would need a
    file of their own), else ``virtualenvs/NAME.txt`` when there is one."""
    if given:
        if len(given) > 1:
            msg = "-r takes one requirements file on Squall (put the others' lines in it, or `-r` them there)"
            raise SquallError(msg)
        path = Path(given[0])
        if not path.is_file():
            msg = f"no requirements file {path}"
            raise SquallError(msg)
        return path.resolve()
    path = project.requirements_dir / f"{name}.txt"
    if path.is_file():
        return path
    notes.append(f"no {path.relative_to(project.root)}: the topology runs with Squall's own packages")
    return None


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_project_name(name: str) -> None:
    """A quickstart project's name: a directory and, as streamparse has it, a Python identifier."""
    if not _NAME.match(name):
        msg = f"a project name is letters, digits and '_', not starting with a digit: {name!r}"
        raise SquallError(msg)
