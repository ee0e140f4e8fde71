"""ZooKeeper connections, and the embedded single server for development.

Production points ``storm.zookeeper.servers`` at an existing ensemble.  For
development and tests, :class:`DevZookeeper` runs the server class shipped in
pyspark's wheel (``pyspark/jars/zookeeper-*.jar``) with the JVM that Spark
needs anyway: ``java -cp "<pyspark>/jars/*" ...ZooKeeperServerMain <dir>/zoo.cfg``,
listening on one address only (127.0.0.1 unless given another: a node's own
address in a multi-host test), its data directory readable by this user only.

Secure mode (``squall.secure``, the default): every client authenticates with
the cluster's ZooKeeper digest credentials (from the keyring, or given: a
worker has them from its secrets file), and every node Squall creates carries
a digest ACL naming each of those credentials with all permissions, so only
the cluster reads or writes it.  During a rotation the keyring lists the new
password and the previous one: clients authenticate with both, and new nodes
name both, so daemons of either generation reach every node.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import structlog
from kazoo.client import KazooClient
from kazoo.retry import KazooRetry
from kazoo.security import ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, Id, Permissions, make_digest_acl

from squall.config import DEFAULTS
from squall.errors import ConfigError, CoordinationError
from squall.security.files import write_private

log = structlog.get_logger("squall.cluster.zookeeper")


def connect_string(conf: dict[str, Any]) -> str:
    port = conf["storm.zookeeper.port"]
    hosts = []
    for server in conf["storm.zookeeper.servers"]:
        hosts.append(server if ":" in str(server) else f"{server}:{port}")
    return ",".join(hosts)


Credentials = list[tuple[str, str]]


def is_secure(conf: dict[str, Any]) -> bool:
    return bool(conf.get("squall.secure", DEFAULTS["squall.secure"]))


def cluster_credentials(conf: dict[str, Any], credentials: Credentials | None = None) -> Credentials | None:
    """The digest credentials a client of this conf uses: None when the conf is
    not secure; else ``credentials`` if given, else the keyring's (current first)."""
    if not is_secure(conf):
        return None
    if credentials is None:
        from squall.security.keyring import Keyring, keyring_path

        try:
            credentials = Keyring.for_conf(conf).zookeeper_credentials()
        except ConfigError as e:
            msg = f"squall.secure is on, and ZooKeeper needs the cluster keyring's credentials: {e}"
            raise ConfigError(msg) from e
        where = f"the keyring {keyring_path(conf)}"
    else:
        where = "the credentials given"
    credentials = [(str(user), str(password)) for user, password in credentials]
    if not credentials:
        msg = (f"squall.secure is on but {where} has no ZooKeeper credentials: "
               "run `squall secrets init`")
        raise ConfigError(msg)
    for user, password in credentials:
        if not user or ":" in user or not password:
            msg = f"invalid ZooKeeper credential for user {user!r} in {where}"
            raise ConfigError(msg)
    return credentials


def digest_acls(credentials: Credentials) -> list[ACL]:
    """Creator-only ACLs: every permission for each credential, nothing for anyone else."""
    return [make_digest_acl(user, password, all=True) for user, password in credentials]


def digest_id(user: str, password: str) -> str:
    """``user:base64(sha1(user:password))``: how an ACL names a digest credential.
    It can be handed out (to a worker that must keep the cluster's access to the
    nodes it makes) without handing out the password."""
    return make_digest_acl(user, password).id.id


def make_client(conf: dict[str, Any], credentials: Credentials | None = None,
                also_allowed: Sequence[str] = ()) -> KazooClient:
    """A kazoo client that retries forever in the background, as daemons need.

    Secure (see the module's docstring): it authenticates with ``credentials``
    (None: the keyring's) and creates nodes with their digest ACLs, and with
    every permission for each digest id of ``also_allowed`` (:func:`digest_id`).
    """
    retry = KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=2)
    secured = cluster_credentials(conf, credentials)
    auth: dict[str, Any] = {}
    if secured is not None:
        acl = digest_acls(secured) + [ACL(Permissions.ALL, Id("digest", i)) for i in also_allowed]
        auth = {"auth_data": [("digest", f"{user}:{password}") for user, password in secured],
                "default_acl": acl}
    return KazooClient(
        hosts=connect_string(conf),
        timeout=conf["storm.zookeeper.session.timeout"] / 1000.0,
        connection_retry=retry,
        command_retry=KazooRetry(max_tries=5, delay=0.1, backoff=2, max_delay=2),
        **auth,
    )


def connect(client: KazooClient, conf: dict[str, Any], who: str = "squall") -> None:
    """Start ``client``, or raise a CoordinationError saying who could not reach what."""
    try:
        client.start(timeout=conf["storm.zookeeper.connection.timeout"] / 1000.0)
    except Exception as e:
        client.close()
        msg = f"{who} cannot reach ZooKeeper at {connect_string(conf)}: {e}"
        raise CoordinationError(msg) from e


def disconnect(client: KazooClient) -> None:
    """Close the session (its ephemeral nodes go at once) and the client."""
    client.stop()
    client.close()


def start_client(conf: dict[str, Any], credentials: Credentials | None = None) -> KazooClient:
    client = make_client(conf, credentials)
    connect(client, conf)
    return client


def seal_root(client: KazooClient) -> bool:
    """ZooKeeper's ``/`` readable by anyone and changed only by this (secure) client's
    credentials, where it was open to all: nothing without the cluster's password
    creates nodes beside Squall's tree.  For an ensemble Squall owns (the dev one);
    True if it changed."""
    acl = list(client.default_acl or ())
    if not acl or any(a.id.scheme != "digest" for a in acl):
        return False
    current, _stat = client.get_acls("/")
    if set(current) != set(OPEN_ACL_UNSAFE):
        return False  # someone chose this ACL: left as it is
    client.set_acls("/", [*READ_ACL_UNSAFE, *acl])
    return True


def zookeeper_classpath() -> str:
    """pyspark's jars folder, found without importing pyspark (which would load Spark's
    Python side into every daemon that starts a development ZooKeeper)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        msg = "the development ZooKeeper runs the jar pyspark ships: pip install 'squall[dev]'"
        raise CoordinationError(msg)
    jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
    if not any(jars.glob("zookeeper-*.jar")):
        msg = f"no zookeeper jar in {jars}; is pyspark installed completely?"
        raise CoordinationError(msg)
    return f"{jars}/*"


class DevZookeeper:
    """One standalone ZooKeeper server in a child JVM, on one address only: ``host``
    (127.0.0.1 by default; a node's own address where the node is a network namespace).

    Its configuration is ``<data dir>/zoo.cfg``; the data directory is 0700
    (and made so if it exists): the snapshots hold every node's data,
    whatever the nodes' ACLs say.
    """

    def __init__(self, port: int, data_dir: str | os.PathLike[str],
                 log_path: str | os.PathLike[str] | None = None, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = port
        self.data_dir = Path(data_dir)
        self._log_path = log_path
        self._log_file: IO[bytes] | None = None
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def config_file(self) -> Path:
        return self.data_dir / "zoo.cfg"

    def config(self) -> str:
        settings = {
            "tickTime": 2000,
            "dataDir": self.data_dir.resolve(),
            "clientPort": self.port,
            "clientPortAddress": self.host,
            "maxClientCnxns": 200,
            # No Jetty admin server (it would listen on 8080, all interfaces).
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "srvr,ruok",
            # A development server need not fsync its log on every write; on a
            # busy disk a stalled fsync held up new sessions past their timeout.
            # What it wrote still survives a restart (the page cache keeps it).
            "forceSync": "no",
        }
        return "".join(f"{key}={value}\n" for key, value in settings.items())

    def command(self) -> list[str]:
        java = shutil.which("java")
        if java is None:
            msg = "java not found on PATH: the embedded ZooKeeper needs Java 17"
            raise CoordinationError(msg)
        # A development server's load is light: the JVM's quick compiler alone and one GC
        # thread start it on half the CPU (the suite starts one for most cluster tests).
        return [java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                "-Dzookeeper.admin.enableServer=false", "-Dzookeeper.forceSync=no",
                "-Dlog4j2.level=WARN", "-Djava.net.preferIPv4Stack=true", "-cp", zookeeper_classpath(),
                "org.apache.zookeeper.server.ZooKeeperServerMain", str(self.config_file)]

    def prepare(self) -> None:
        """The data directory (0700) and its zoo.cfg (0600)."""
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.data_dir, 0o700)
        write_private(self.config_file, self.config())

    def start(self, timeout: float = 30.0) -> None:
        self.prepare()
        out: Any = subprocess.DEVNULL
        if self._log_path is not None:
            fd = os.open(self._log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self._log_file = out = os.fdopen(fd, "ab")  # closed in stop()
        self.process = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        self.wait_ready(timeout)
        log.info("zookeeper started", port=self.port, pid=self.process.pid, data_dir=str(self.data_dir))

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                msg = f"zookeeper exited with code {self.process.returncode} while starting"
                raise CoordinationError(msg)
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5) as s:
                    # "srvr" is whitelisted by default.  A server still loading its database
                    # answers it too, that it is "not currently serving requests", and closes
                    # a client's connection: a client's first tries then fail, and its
                    # backoff can outlast the connection timeout (seen in CI).
                    s.sendall(b"srvr")
                    answer = s.recv(128)
                    if answer and b"not currently serving" not in answer:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        msg = f"zookeeper did not start on port {self.port} within {timeout}s"
        raise CoordinationError(msg)

    def stop(self, timeout: float = 10.0) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        self._close_log()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._close_log()

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
