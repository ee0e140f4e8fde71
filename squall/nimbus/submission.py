"""How nimbus takes a topology in: checked (its name, conf and size, its plan, its
code imported in a sandbox: squall.nimbus.verifier), then written to ZooKeeper
and assigned.

The topology's record and code go to ZooKeeper before its assignment, and in a
secure cluster its workers' CURVE keypair before either: a supervisor never
sees a topology whose workers it cannot launch.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from squall import config as config_mod
from squall.cluster.state import TOPOLOGY_USER_PREFIX, ClusterState
from squall.cluster.zookeeper import digest_id
from squall.errors import ConfigError, SquallError, TopologyValidationError
from squall.nimbus.errors import ApiError, bad_request
from squall.nimbus.verifier import Verifier
from squall.runtime.envbuild import EnvBuildError, Environment, EnvStore, key_of
from squall.runtime.envs import EnvCache, Requirements, from_record
from squall.security.curve import new_keypair
from squall.security.keyring import DRPC_TOKEN_PREFIX, Keyring
from squall.topology.topology import definition_from_dict
from squall.worker.admission import check_name, plan_submission

log = structlog.get_logger("squall.nimbus.submission")

def transactional_paths(defn: Any, topo_conf: dict[str, Any]) -> list[str]:
    """The ZooKeeper nodes a topology's transactional state may live under: one
    per transactional id it can use (a component's own, topology.transactional.id,
    the topology's name: squall.transactional's rule; the definition's name, for
    checkpointed state's record), below its root.  None when
    it keeps that state in another ensemble (transactional.zookeeper.servers)."""
    if topo_conf.get("transactional.zookeeper.servers"):
        return []
    key = "transactional.zookeeper.root"
    root = topo_conf.get(key) or config_mod.DEFAULTS[key]
    ids = {topo_conf.get("topology.transactional.id"), topo_conf.get("topology.name"),
           defn.name,  # checkpointed state's record is keyed by the definition's name
           *(c.options.get("transactional_id") for c in defn.components.values())}
    return sorted(f"{root.rstrip('/')}/{i}" for i in ids
                  if isinstance(i, str) and i and "/" not in i and i not in (".", ".."))


class Submission:
    """Checks a submitted topology, writes it, and has it assigned (``reconcile``)."""

    def __init__(self, state: ClusterState, conf: dict[str, Any], reconcile: Callable[[str], None],
                 put_topology: Callable[[dict[str, Any]], None],
                 now: Callable[[], float] = time.time) -> None:
        self.state = state
        self.conf = conf
        self.now = now
        self._reconcile = reconcile  # assigns the new topology (squall.nimbus.control)
        # Writes the new topology's record within the leader's term (squall.nimbus.control):
        # a nimbus deposed since answers 503 and records nothing, so a retry is not a 409.
        self._put_topology = put_topology
        self.verifier = Verifier(conf)
        # Topologies' environments, built here before one is taken in (squall.runtime.envbuild).
        setting = {**config_mod.DEFAULTS, **conf}.__getitem__  # tests build nimbus from a partial conf
        self.envs = EnvStore(Path(setting("storm.local.dir")).resolve() / "envs",
                             setting("supervisor.env.build.timeout.secs"))
        self.env_cache = EnvCache(setting("supervisor.env.cache.grace.secs"))
        self._env_lock = threading.Lock()
        self._envs_in_flight: dict[str, int] = {}  # key -> submissions building or verifying in it

    def start(self) -> None:
        """At nimbus's start: whether submitted code is imported here (ConfigError when
        nimbus.verify.sandbox is 'required' and no sandbox works)."""
        self.verifier.start()

    def submit(self, body: Any, owner: str | None = None) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        name = body.get("name")
        conf = body.get("conf") or {}
        try:
            check_name(name)  # first: the rest of a request under a bad name is not read
            defn = definition_from_dict(body.get("topology"))
            # The checks local mode runs too (squall.worker.admission), the cluster's size
            # caps among them: e.g. checkpointed state in a node-local store is refused when
            # workers may span hosts; Spark bolts near the timeout warned of.
            hosts = [s.get("host", node) for node, s in self.state.supervisors().items()]
            plan, warnings = plan_submission(name, defn, conf, hosts, log, limits=self.conf)
        except (TopologyValidationError, ConfigError) as e:
            raise bad_request(str(e)) from e
        if any(r["name"] == name and r["status"] != "killing" for r in self.state.topologies()):
            raise ApiError(409, f"a topology named {name!r} is already running")
        blob = self._decode_code(body.get("code"))
        try:
            requirements = from_record(body.get("requirements"))
        except SquallError as e:
            raise bad_request(f"requirements: {e}") from e
        key = key_of(requirements) if requirements is not None else None
        if key is not None:
            with self._env_lock:
                self._envs_in_flight[key] = self._envs_in_flight.get(key, 0) + 1
        try:
            env = self._environment(name, requirements)
            self.verifier.verify(defn.to_dict(), blob, env.path if env is not None else None)
            return self._take_in(name, defn, conf, plan, warnings, blob, owner, requirements, env)
        finally:
            if key is not None:
                with self._env_lock:
                    self._envs_in_flight[key] -= 1
                    if not self._envs_in_flight[key]:
                        del self._envs_in_flight[key]

    def _environment(self, name: str, requirements: Requirements | None) -> Environment | None:
        """The topology's environment, built here now unless cached; a failed build is the
        submitter's error, with pip's words (nothing of it is left)."""
        if requirements is None:
            return None
        try:
            env = self.envs.ensure(requirements)
        except EnvBuildError as e:
            log.warning("topology environment failed", topology=name, error=str(e))
            raise bad_request(f"the topology's environment could not be built: {e}") from e
        log.info("topology environment ready", topology=name, key=env.key, built=env.built,
                 secs=round(env.secs, 2))
        return env

    def sweep_envs(self) -> None:
        """Remove environments no topology uses, after supervisor.env.cache.grace.secs."""
        in_use: dict[str, set[str]] = {}
        for record in self.state.topologies():
            try:
                requirements = from_record(record.get("requirements"))
            except SquallError:
                continue
            if requirements is not None:
                in_use.setdefault(key_of(requirements), set()).add(record["id"])
        with self._env_lock:
            for key in self._envs_in_flight:
                in_use.setdefault(key, set()).add("(submitting)")
        for key in self.env_cache.sweep(self.envs.present(), in_use, self.now()):
            self.envs.remove(key)

    def _take_in(self, name: str, defn: Any, conf: dict[str, Any], plan: Any, warnings: list[str],
                 blob: bytes, owner: str | None, requirements: Requirements | None,
                 env: Environment | None) -> dict[str, Any]:
        topology_id = f"{name}-{int(self.now())}-{os.urandom(3).hex()}"
        if self.conf["squall.secure"]:
            # Before the topology exists: a supervisor never sees it without its workers' key.
            self.state.put_topology_secrets(topology_id, self._new_secrets(topology_id, defn, {
                **defn.config, **conf, "topology.name": name}))
        self.state.put_code(topology_id, blob)
        # Storm's topology.name: the name submitted, which the workers' components see in
        # their conf (the definition's own name is its class's); a transactional id
        # defaults to it.
        topo_conf = {**defn.config, **conf, "topology.name": name}
        try:
            self._put_topology({
                "id": topology_id, "name": name, "status": "active", "definition": defn.to_dict(),
                "conf": topo_conf, "submitted": self.now(), "num_workers": plan.conf["topology.workers"],
                "owner": owner,
                **({"requirements": requirements.to_record()} if requirements is not None else {}),
            })
        except ApiError:  # refused (no longer the leader): its code, secrets and grants go too
            self.state.remove_topology(topology_id)
            raise
        log.info("topology submitted", topology=name, id=topology_id, owner=owner,
                 executors=len(plan.executors), workers=plan.conf["topology.workers"])
        self._reconcile(topology_id)
        answer: dict[str, Any] = {"name": name, "id": topology_id}
        if warnings:
            answer["warnings"] = warnings
        if env is not None:
            answer["environment"] = {"key": env.key, "built": env.built, "secs": round(env.secs, 3)}
        return answer

    def _new_secrets(self, topology_id: str, defn: Any, topo_conf: dict[str, Any]) -> dict[str, Any]:
        """The topology's CURVE keypair, and a ZooKeeper identity of its own that
        reaches only its transactional state's nodes (granted now, revoked when
        it is removed): its workers never hold the cluster's password."""
        user, password = f"{TOPOLOGY_USER_PREFIX}{topology_id}", secrets.token_urlsafe(24)
        paths = transactional_paths(defn, topo_conf)
        self.state.grant(paths, digest_id(user, password))
        # Its DRPC credential: what its DRPC spouts and ReturnResults show a DRPC server, which
        # knows it by its hash (squall.drpc_server.invokers) until the topology is removed.
        token = f"{DRPC_TOKEN_PREFIX}{topology_id}.{secrets.token_urlsafe(32)}"
        self.state.put_drpc_invoker(topology_id, hashlib.sha256(token.encode()).hexdigest())
        return {"curve": new_keypair(), "zookeeper": {"user": user, "password": password, "paths": paths},
                "drpc": {"token": token, "ca": self._ca_pem()}}

    def _ca_pem(self) -> str | None:
        """What the cluster's clients trust: nimbus.tls.ca.path, else the keyring's CA."""
        ca_path = self.conf.get("nimbus.tls.ca.path")
        if ca_path:
            return Path(ca_path).read_text()
        return Keyring.for_conf(self.conf).ca_pem

    def _decode_code(self, code: Any) -> bytes:
        if code is None:
            return b""
        if not isinstance(code, str):
            raise bad_request("'code' must be a base64 string of a zip file")
        try:
            blob = base64.b64decode(code, validate=True)
        except (binascii.Error, ValueError) as e:
            raise bad_request(f"'code' is not valid base64: {e}") from e
        if len(blob) > self.conf["nimbus.code.max.bytes"]:
            raise bad_request(f"the code package is {len(blob)} bytes, over nimbus.code.max.bytes")
        return blob
