"""Which user a topology's workers run as on this node, and what of the node they may
write: a uid of ``supervisor.worker.uids`` per topology (:class:`RunAsUsers`, kept in
``uids.json`` across restarts), its state directory in its owner's folder
(:class:`RunAs`), handed over to that uid without following a link (:func:`hand_over`)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from squall.errors import ConfigError, SquallError
from squall.runtime import sandbox
from squall.security.admission import check_id, check_user_name
from squall.supervisor.workers import read_json, write_json

log = structlog.get_logger("squall.supervisor.run_as")

NO_OWNER = "-"  # the state folder of topologies with no owner (an insecure cluster): never a user's name


@dataclass(frozen=True)
class RunAs:
    """A worker run as its topology's own user, in a sandbox: what it may write
    (its state directory) besides its slot, and read besides its code."""

    identity: sandbox.Identity
    state_dir: Path
    shared: tuple[str, ...] = ()  # supervisor.worker.shared.dirs


def hand_over(top: Path, uid: int, gid: int) -> None:
    """Make ``top`` and everything below it ``uid``'s (a topology's state, kept across its
    submissions, which may get another uid).  Walked by directory descriptors, never
    through a link, and never a file with a second name: a worker of the same state,
    running meanwhile, cannot swap a folder for a link and lead root to chown a file
    elsewhere (``os.fwalk`` opens each folder it enters without following links)."""
    os.chown(top, uid, gid, follow_symlinks=False)
    for _folder, dirs, files, dir_fd in os.fwalk(top, follow_symlinks=False):
        for entry in (*dirs, *files):
            try:
                st = os.stat(entry, dir_fd=dir_fd, follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode) or (not stat.S_ISDIR(st.st_mode) and st.st_nlink > 1):
                    continue
                if (st.st_uid, st.st_gid) != (uid, gid):
                    os.chown(entry, uid, gid, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                continue


def uids_kept(uids: Mapping[str, int], keep: Collection[str],
              running: Collection[int | None]) -> dict[str, int]:
    """Topology id -> uid, less the topologies no longer kept whose uid no process runs as:
    a uid is free again only once no process of it is left (its worker may be stopping),
    so that the next topology given it cannot reach the last one's."""
    return {t: uid for t, uid in uids.items() if t in keep or uid in running}


class RunAsUsers:
    """Which user each topology's workers run as on this node (supervisor.run.worker.as.user):
    a uid of ``supervisor.worker.uids`` each, kept in ``uids.json`` across restarts."""

    def __init__(self, conf: Mapping[str, Any], local_dir: Path) -> None:
        self.conf = conf
        self.local_dir = local_dir
        self.enabled = False  # decided at the supervisor's start (decide())
        self._uids_file = local_dir / "uids.json"
        self.uids: dict[str, int] = {}  # topology id -> its workers' uid (and gid) on this node

    def decide(self) -> bool:
        """Whether workers run as their topologies' own users; a ConfigError if
        asked for and impossible, a warning saying what follows if merely impossible."""
        wanted = self.conf["supervisor.run.worker.as.user"]
        if wanted is False:
            log.warning("workers run as the supervisor's own user (supervisor.run.worker.as.user is "
                        "false): a topology's code can read what this supervisor can")
            return False
        for shared in self.conf["supervisor.worker.shared.dirs"]:
            if self.local_dir.is_relative_to(Path(shared).resolve()):
                msg = (f"supervisor.worker.shared.dirs names {shared}, which holds storm.local.dir "
                       f"({self.local_dir}): workers would see every slot and every topology's code")
                raise ConfigError(msg)
        first, _last = self.conf["supervisor.worker.uids"]
        why = sandbox.unavailable(sandbox.Identity(first, first))
        if why is None:
            saved = read_json(self._uids_file)
            if isinstance(saved, dict):
                self.uids = {str(k): int(v) for k, v in saved.items() if isinstance(v, int)}
            return True
        if wanted is True:
            msg = f"supervisor.run.worker.as.user is true, but workers cannot run as other users here: {why}"
            raise ConfigError(msg)
        log.warning("workers run as the supervisor's own user: a topology's code can read what this "
                    "supervisor can (docs/security.md)", why=why)
        return False

    @property
    def shared(self) -> tuple[str, ...]:
        return tuple(str(Path(d).resolve()) for d in self.conf["supervisor.worker.shared.dirs"])

    @property
    def spark_identity(self) -> sandbox.Identity:
        last = self.conf["supervisor.worker.uids"][1]  # never a topology's (see for_topology)
        return sandbox.Identity(last, last)

    def for_topology(self, topology_id: str, definition: Mapping[str, Any], owner: Any) -> RunAs | None:
        """``definition``: the topology's, whose name its checkpointed state is kept
        under (squall.state.providers.state_key), so its state directory is that name's,
        in its owner's folder: another team's topology of the same name never sees it."""
        if not self.enabled:
            return None
        name = check_id("the topology definition's name", definition.get("name"))
        folder = NO_OWNER if owner is None else check_user_name("the topology's owner", owner)
        uid = self.uids.get(topology_id)
        if uid is None:
            first, last = self.conf["supervisor.worker.uids"]
            uid = sandbox.pick_uid(self.uids.values(), first, last - 1)
            if uid is None:
                msg = f"no free uid left in supervisor.worker.uids {[first, last]} for the topology's workers"
                raise SquallError(msg)
            self.uids[topology_id] = uid
            write_json(self._uids_file, self.uids)
        return RunAs(sandbox.Identity(uid, uid), self.local_dir / "state" / folder / name, self.shared)

    def release(self, keep: Collection[str], running: Callable[[], set[int | None]]) -> None:
        """Free the uids of topologies not in ``keep`` (see :func:`uids_kept`); ``running``,
        the uids this node's workers run as, is looked at only when one might be freed."""
        if set(self.uids) - set(keep):
            self.uids = uids_kept(self.uids, keep, running())
            write_json(self._uids_file, self.uids)
