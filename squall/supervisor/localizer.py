"""The localizer: what a topology's workers need on this node before they launch, and
its removal once none of them runs here (Storm's localizer).

* code: the topology's package, downloaded from the cluster state and unpacked
  within ``nimbus.code.max.uncompressed.bytes`` and ``nimbus.code.max.entries``
  into ``<local dir>/code/<topology id>/``, readable by its workers' group when
  they run as their own user; removed once no worker here runs or awaits it;
* environments: a topology's requirements built into an environment of their own
  (squall.runtime.envbuild), in a thread each so that other topologies' workers are
  not held up, as user code (squall.runtime.buildbox); removed when unused for
  ``supervisor.env.cache.grace.secs``;
* secrets: in a secure cluster, each topology's workers' ``secrets.json``
  (:func:`worker_secrets`), kept while its workers should run here;
* logs: the workers' logs rotated past their size, and stopped workers' log
  directories removed past their age or over the node's total.

What it reads of the cluster state it is handed as functions: the localizer itself
never talks to ZooKeeper.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import structlog

from squall.cluster.zookeeper import digest_id
from squall.errors import SquallError
from squall.runtime.buildbox import Builder
from squall.runtime.envbuild import EnvStore, key_of
from squall.runtime.envs import EnvCache, Requirements
from squall.runtime.package import extract
from squall.supervisor import logfiles, logrotation
from squall.supervisor.workers import private_dir

log = structlog.get_logger("squall.supervisor.localizer")


def worker_secrets(topology_id: str, topology_secrets: Any,
                   credentials: list[tuple[str, str]]) -> dict[str, Any]:
    """The content of a worker's secrets.json, or a SquallError saying why the
    topology's workers may not run (no CURVE keypair in ZooKeeper).  ZooKeeper:
    the topology's own identity, and the digest ids of the cluster's
    credentials (not their passwords), so that the nodes it makes stay the
    cluster's too; a topology submitted before identities existed gets the
    cluster's credentials."""
    curve = topology_secrets.get("curve") if isinstance(topology_secrets, Mapping) else None
    if not isinstance(curve, Mapping) or not curve.get("public") or not curve.get("secret"):
        msg = (f"topology {topology_id} has no CURVE keypair in ZooKeeper (secrets/{topology_id}): "
               "a secure supervisor does not launch its workers; resubmit it to a secure nimbus")
        raise SquallError(msg)
    if not credentials:
        msg = "a secure supervisor needs the cluster's ZooKeeper credentials for its workers"
        raise SquallError(msg)
    own = topology_secrets.get("zookeeper")
    if isinstance(own, Mapping) and isinstance(own.get("user"), str) and isinstance(own.get("password"), str):
        zookeeper = {"user": own["user"], "passwords": [own["password"]],
                     "acl": [digest_id(u, p) for u, p in credentials]}
    else:
        user = credentials[0][0]
        zookeeper = {"user": user, "passwords": [p for u, p in credentials if u == user]}
    out = {"curve": {"public": curve["public"], "secret": curve["secret"]}, "zookeeper": zookeeper}
    drpc = topology_secrets.get("drpc")
    if isinstance(drpc, Mapping) and isinstance(drpc.get("token"), str):
        # What its DRPC spouts and ReturnResults show a DRPC server (squall.drpc), and the CA
        # that server's certificate is signed by.
        out["drpc"] = {"token": drpc["token"], "ca": drpc.get("ca")}
    return out



class Localizer:
    """This node's topology code, environments, worker secrets and worker logs.  ``on_built``
    is called when an environment's build ends (the assignment sync launches its workers)."""

    def __init__(self, conf: Mapping[str, Any], local_dir: Path, now: Callable[[], float],
                 on_built: Callable[[], None]) -> None:
        self.conf = conf
        self.local_dir = local_dir
        self.now = now
        self.secrets: dict[str, dict[str, Any]] = {}  # topology id -> its workers' secrets.json
        timeout = conf["supervisor.env.build.timeout.secs"]
        # Built as user code (squall.runtime.buildbox): within the cluster's policy, in a sandbox.
        self.envs = EnvStore(local_dir / "envs", timeout, Builder(conf, "supervisor", timeout))
        self.env_cache = EnvCache(conf["supervisor.env.cache.grace.secs"])
        self._env_builds: dict[str, threading.Thread] = {}  # key -> its builder, while it runs
        self._on_built = on_built
        self._next_log_cleanup = 0.0

    # -- secrets ---------------------------------------------------------------

    def ensure_secrets(self, topology_id: str, read: Callable[[], Any],
                       credentials: list[tuple[str, str]]) -> None:
        """The topology's workers' secrets, from what ``read`` gives of the topology's secrets
        the first time; a SquallError if its workers may not run (see :func:`worker_secrets`)."""
        if topology_id not in self.secrets:
            self.secrets[topology_id] = worker_secrets(topology_id, read(), credentials)

    def forget_secrets(self, keep: Collection[str]) -> None:
        for gone in set(self.secrets) - set(keep):
            del self.secrets[gone]

    # -- code ------------------------------------------------------------------

    def ensure_code(self, topology_id: str, read: Callable[[], bytes | None]) -> Path:
        """The topology's code directory, unpacked from what ``read`` gives unless it is already."""
        code_dir = self.local_dir / "code" / topology_id
        if (code_dir / ".complete").exists():
            return code_dir
        blob = read() or b""
        shutil.rmtree(code_dir, ignore_errors=True)
        if blob:
            try:
                extract(blob, code_dir, max_bytes=self.conf["nimbus.code.max.uncompressed.bytes"],
                        max_entries=self.conf["nimbus.code.max.entries"])
            except SquallError:
                shutil.rmtree(code_dir, ignore_errors=True)
                raise
        private_dir(code_dir)
        (code_dir / ".complete").write_text("")
        log.info("code downloaded", topology=topology_id, bytes=len(blob))
        return code_dir

    @staticmethod
    def share_code(code_dir: Path, gid: int) -> None:
        """The topology's code readable (not writable) by its workers' group."""
        if code_dir.stat().st_gid == gid:
            return
        for path in (code_dir, *code_dir.rglob("*")):
            os.chown(path, 0, gid, follow_symlinks=False)
            if not path.is_symlink():
                os.chmod(path, 0o750 if path.is_dir() else 0o640)

    def remove_stale_code(self, keep: Collection[str], running: Callable[[], Collection[str | None]]) -> None:
        """Remove the code of topologies neither in ``keep`` nor run by a live worker here
        (``running``: their ids, looked at only if there is code)."""
        base = self.local_dir / "code"
        if not base.is_dir():
            return
        still_running = running()
        for path in base.iterdir():
            if path.name not in keep and path.name not in still_running:
                shutil.rmtree(path, ignore_errors=True)

    # -- environments -----------------------------------------------------------

    def environment(self, requirements: Requirements, topology_id: str,
                    on_failure: Callable[[str], None]) -> tuple[str, str | None]:
        """The key of the environment of ``requirements``, and its Python once it is built;
        None meanwhile, a build started unless one runs (``on_failure``: told why one failed)."""
        key = key_of(requirements)
        if not self.envs.ready(key):
            self._build_env(key, requirements, topology_id, on_failure)
            return key, None
        return key, str(self.envs.path(key) / "bin" / "python")

    def _build_env(self, key: str, requirements: Requirements, topology_id: str,
                   on_failure: Callable[[str], None]) -> None:
        """Build an environment in a thread of its own (other topologies' workers are not held
        up), unless one is at it or a failed build's backoff runs; the next sync launches the
        workers.  A failure is the topology's error, as a worker that cannot launch."""
        if key in self._env_builds or not self.env_cache.may_build(key, self.now()):
            return

        def build() -> None:
            try:
                env = self.envs.ensure(requirements)
                self.env_cache.built(key)
                log.info("topology environment ready", topology=topology_id, key=key, built=env.built,
                         secs=round(env.secs, 2))
            except Exception as e:  # noqa: BLE001 - pip's failure or the disk's: told, retried later
                wait = self.env_cache.build_failed(key, self.now())
                log.error("topology environment failed", topology=topology_id, key=key, retry_secs=wait)
                try:
                    on_failure(f"its environment could not be built (retried with backoff): {e}")
                except Exception:  # noqa: BLE001 - ZooKeeper away: logged above
                    log.warning("cannot report the environment's failure", topology=topology_id)
            finally:
                self._env_builds.pop(key, None)
                self._on_built()

        thread = threading.Thread(target=build, name=f"supervisor-env-{key[:12]}", daemon=True)
        self._env_builds[key] = thread
        thread.start()

    def sweep_envs(self, env_users: Mapping[str, set[str]]) -> None:
        """Remove the environments no topology here has used for the grace period;
        ``env_users``: environment key -> the topologies here that run in it."""
        in_use = {key: set(users) for key, users in env_users.items()}
        for key in list(self._env_builds):
            in_use.setdefault(key, set()).add("(building)")
        for key in self.env_cache.sweep(self.envs.present(), in_use, self.now()):
            self.envs.remove(key)

    # -- logs ------------------------------------------------------------------

    def keep_logs(self, desired: Mapping[int, Mapping[str, Any]]) -> None:
        """Rotate the logs of the workers this node should run that are due; now and then,
        remove stopped ones'.  From what the slots should run, which the process sync just
        acted on: no process or file of a slot looked at a second time."""
        live = [(want["topology_id"], port) for port, want in desired.items()]
        cap = int(self.conf["logviewer.max.per.worker.logs.size.mb"] * 2**20)
        for topology_id, port in live:
            for name in logfiles.LOGS:  # worker.log and events.log, each within the same bounds
                logrotation.rotate_if_due(logfiles.worker_dir(self.local_dir, topology_id, port),
                                          self.conf["supervisor.worker.log.max.bytes"], cap, name)
        now = self.now()
        if now >= self._next_log_cleanup:
            self._next_log_cleanup = now + self.conf["logviewer.cleanup.interval.secs"]
            logrotation.clean_up(self.local_dir, live, now, self.conf["logviewer.cleanup.age.mins"] * 60,
                                 int(self.conf["logviewer.max.sum.worker.logs.size.mb"] * 2**20))
