"""Configuration: Storm's key names, defaults in one place, checked once.

A config is a plain ``dict`` keyed by Storm's dotted names.  Users may add
keys of their own (Storm passes unknown keys through to components), but a
known key with a value of the wrong type is refused with a clear error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from squall.errors import ConfigError

WORKER_DIR = "squall.worker.dir"
WORKER_PIDS = "pids"  # the multilang pid files' directory, under the worker's

# key -> (default, accepted types, lower bound or None)
_SPEC: dict[str, tuple[Any, tuple[type, ...], float | None]] = {
    "topology.workers": (1, (int,), 1),
    # None means one acker executor per worker, as in Storm.
    "topology.acker.executors": (None, (int, type(None)), 0),
    "topology.message.timeout.secs": (30, (int, float), 0.001),
    "topology.max.spout.pending": (None, (int, type(None)), 1),
    # The Storm@Twitter paper's tuner (§3.3.3, squall.tuning): every .secs (the paper's t) a
    # spout executor hands it the progress made since, and takes its max spout pending.
    "topology.max.spout.pending.autotune": (False, (bool,), None),
    "topology.max.spout.pending.autotune.secs": (120, (int, float), 0.01),
    "topology.max.spout.pending.autotune.class": ("squall.tuning.autotune:PaperTuner", (str,), None),
    # Beyond the paper: a complete latency (ms) to keep under, trading at most a few percent of
    # throughput (squall.tuning.autotune.LatencyTargetTuner); None: throughput only.
    "topology.max.spout.pending.autotune.latency.ms": (None, (int, float, type(None)), 0.001),
    # How close two periods' progress must be to count as "similar" (the paper leaves it open):
    # a fraction of the last; raise it where throughput is noisy (shared machines, VMs).
    "topology.max.spout.pending.autotune.tolerance": (0.05, (int, float), 0),
    "topology.tick.tuple.freq.secs": (None, (int, float, type(None)), 0.001),
    "topology.debug": (False, (bool,), None),
    # Shuffle prefers the emitting worker's own tasks, as Storm 2's load-aware shuffle does:
    # it widens to every task when the local ones' load (queue fill, or the share of a core
    # their threads use, whichever is higher) passes the higher bound and narrows again
    # below the lower bound.
    "topology.disable.loadaware.messaging": (False, (bool,), None),
    "topology.localityaware.higher.bound": (0.8, (int, float), 0),
    "topology.localityaware.lower.bound": (0.2, (int, float), 0),
    # Capacity of an executor's data queue, in tuples: above it spouts pause.
    "topology.executor.receive.buffer.size": (32768, (int,), 1),
    # Capacity of a worker's transfer queue (what waits for its send thread), in
    # messages: a batch of tuples or one ack each.  Above it the worker counts as
    # congested, like a full executor queue, so no spout outruns the send thread.
    "topology.transfer.buffer.size": (1024, (int,), 2),
    # A spout holds back while its worker's bolts have more than this many tuples
    # queued in all (they share its GIL); 0 turns the yield off.  See spout_executor.
    "topology.spout.yield.queued.tuples": (200, (int,), 0),
    # How many times a spout's next_tuple runs before its output is flushed.
    "topology.spout.batch.size": (64, (int,), 1),
    # How long a spout sleeps when next_tuple emitted nothing (Storm's default 1 ms).
    "topology.sleep.spout.wait.strategy.time.ms": (1, (int, float), 0),
    "topology.max.error.report.per.interval": (5, (int,), 1),
    "topology.error.throttle.interval.secs": (10, (int, float), 0.001),
    # Serialize every emitted value with msgpack, not just the cheap type check.
    "topology.testing.always.try.serialize": (False, (bool,), None),
    "topology.auto.task.hooks": ([], (list,), None),
    # Worker restarts back off exponentially from initial to max.
    "supervisor.worker.restart.backoff.initial.secs": (1.0, (int, float), 0),
    "supervisor.worker.restart.backoff.max.secs": (30.0, (int, float), 0),
    "worker.shutdown.timeout.secs": (5.0, (int, float), 0),
    # The garbage collector's gen-0 threshold while workers run (see squall.worker.gc).
    "worker.gc.gen0.threshold": (50_000, (int,), 0),
    # Worker processes (squall.worker.process): heartbeat.json is rewritten this often,
    "worker.heartbeat.frequency.secs": (1.0, (int, float), 0.01),
    # assignment.json is checked for changes this often,
    "worker.assignment.poll.secs": (0.5, (int, float), 0.01),
    # a congested worker repeats it to its peers this often (they forget it after 3 periods).
    "worker.backpressure.resend.secs": (1.0, (int, float), 0.01),
    # Frames a ZeroMQ push socket queues for one peer before dropping new ones.
    "zmq.hwm": (1000, (int,), 1),
    # -- multilang (Storm's keys and defaults) ------------------------------
    "topology.multilang.serializer": ("org.apache.storm.multilang.JsonSerializer", (str,), None),
    # None: fall back to supervisor.worker.timeout.secs, as Storm does.
    "topology.subprocess.timeout.secs": (None, (int, float, type(None)), 0.001),
    "topology.shellbolt.max.pending": (100, (int,), 1),
    "topology.multilang.resources.dir": (None, (str, type(None)), None),
    "topology.multilang.tap.dir": (None, (str, type(None)), None),
    # Set by a worker process to its own directory (never by users): multilang
    # children write their pid files in <dir>/pids, as under Storm's
    # <storm.local.dir>/workers/<worker id>/pids, and the supervisor kills any
    # a dead worker left behind.
    "squall.worker.dir": (None, (str, type(None)), None),
    # -- transactional topologies (squall.transactional) ----------------------
    # Their state's key; None: the topology's name.
    "topology.transactional.id": (None, (str, type(None)), None),
    # Where the state lives: this root in the cluster's ZooKeeper, or in another
    # ensemble when servers (and port) are set (Storm's keys and defaults).
    "transactional.zookeeper.root": ("/transactional", (str,), None),
    "transactional.zookeeper.servers": (None, (list, type(None)), None),
    "transactional.zookeeper.port": (None, (int, type(None)), 1),
    # -- stateful bolts with checkpoints (squall.state; docs/state.md) ----------
    # Where bolts' checkpointed state lives: memory (lost with its worker),
    # sqlite (one machine) or redis; the .config is a JSON object (or its text,
    # as Storm's): {"path": ...} for sqlite, {"url": ...} for redis.
    "topology.state.provider": ("sqlite", (str,), None),
    "topology.state.provider.config": (None, (str, dict, type(None)), None),
    # How often a checkpoint starts; must stay below topology.message.timeout.secs.
    "topology.state.checkpoint.interval.ms": (1000, (int, float), 1),
    # SQLite state files go here (<dir>/<topology>.sqlite); None: ~/.squall/state, one
    # place per machine and user, which every worker of the topology on the machine shares.
    "squall.state.dir": (None, (str, type(None)), None),
    # -- security (squall.security; README "Security") -------------------------
    # On: nimbus speaks TLS and wants a token on every request, workers talk
    # CURVE, ZooKeeper nodes carry digest ACLs; daemons refuse to start without
    # a keyring.  Off only for a dev cluster started with --insecure.
    "squall.secure": (True, (bool,), None),
    # The cluster keyring (0600) written by `squall secrets init`; None: $SQUALL_KEYRING,
    # else ~/.squall/keyring.json.
    "squall.keyring.path": (None, (str, type(None)), None),
    # Nimbus's certificate and key (PEM); None: the keyring's, signed by its CA.
    "nimbus.tls.cert.path": (None, (str, type(None)), None),
    "nimbus.tls.key.path": (None, (str, type(None)), None),
    # What clients trust for nimbus's certificate; None: the keyring's CA.
    "nimbus.tls.ca.path": (None, (str, type(None)), None),
    # Storm's authorizer: admins may do anything; nimbus.users (None: every
    # authenticated user) may submit; read-only users may only read; a topology's
    # owner (its submitter) and its topology.users may kill, rebalance,
    # activate and deactivate it.
    "nimbus.admins": (["admin"], (list,), None),
    "nimbus.users": (None, (list, type(None)), None),
    "nimbus.readonly.users": ([], (list,), None),
    "topology.users": ([], (list,), None),
    # Conf keys whose values are never shown (besides *.password, *.token, *.secret).
    "topology.secret.keys": ([], (list,), None),
    # Environment variables passed to workers (Storm's topology.environment adds more).
    "topology.environment": ({}, (dict,), None),
    "supervisor.worker.env.allow": (["PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ",
                                     "TMPDIR", "JAVA_HOME", "SPARK_HOME", "PYTHONPATH", "VIRTUAL_ENV",
                                     "SQUALL_CONF"], (list,), None),
    # Nimbus HTTP: requests with a valid token served at once (past that one is
    # answered 503, busy), and how long a request may take to send its headers and
    # its body before it is dropped.
    "nimbus.http.max.connections": (32, (int,), 1),
    "nimbus.http.timeout.secs": (30, (int, float), 0.01),
    # Connections that have not yet presented a valid token (in their TLS handshake,
    # sending a first request, or idle): each is closed after this long (at most
    # nimbus.http.timeout.secs); past this many from one address, or in all, the
    # oldest is turned away (503 once its handshake is done), so strangers holding
    # idle sockets never lock users out.
    "nimbus.http.handshake.timeout.secs": (5, (int, float), 0.01),
    "nimbus.http.max.pending.per.address": (128, (int,), 1),
    "nimbus.http.max.pending": (512, (int,), 1),
    # Caps on what one submit may ask for (Storm's nimbus.slots.perTopology,
    # nimbus.executors.perTopology; tasks is Squall's).
    "nimbus.slots.perTopology": (64, (int,), 1),
    "nimbus.executors.perTopology": (2048, (int,), 1),
    "nimbus.tasks.perTopology": (8192, (int,), 1),
    # A code package's size once unzipped, and its number of files.
    "nimbus.code.max.uncompressed.bytes": (256 * 1024 * 1024, (int,), 1),
    "nimbus.code.max.entries": (10_000, (int,), 1),
    # Nimbus imports a submitted package to check that its classes load, in a sandbox
    # (squall.runtime.sandbox: bubblewrap, no network, nothing of the host's files but
    # the system's and Python's, resource limits): "auto" where bubblewrap works on this
    # host and else no import at all (squall submit checked it on the client),
    # "required": nimbus refuses to start without a working sandbox, "off": no import.
    "nimbus.verify.sandbox": ("auto", (str,), None),
    # Nimbus as root runs each verification as a uid of [first, last] of its own (no
    # passwd entry needed), so at most that many at once; not root, as its own user in a
    # user namespace (then only the count matters).
    "nimbus.verify.uids": ([65400, 65463], (list,), None),
    # How long one verification may take before its whole sandbox is killed.
    "nimbus.verify.timeout.secs": (60, (int, float), 0.01),
    # The largest frame a worker accepts from a peer (ZMQ_MAXMSGSIZE): a bigger
    # one is refused by ZeroMQ before it is buffered.
    "zmq.max.message.bytes": (64 * 1024 * 1024, (int,), 1024),
    # The largest message a multilang child may send; past it the child is
    # faulted and restarted.
    "topology.multilang.max.message.bytes": (64 * 1024 * 1024, (int,), 1),
    # What `squall submit` packs from the topology's directory: glob patterns relative
    # to it (None: everything but dotfiles, VCS dirs, virtualenvs and key files).
    "topology.package.include": (None, (list, type(None)), None),
    # -- cluster daemons (squall.yaml) --------------------------------------
    "storm.zookeeper.servers": (["127.0.0.1"], (list,), None),
    "storm.zookeeper.port": (2181, (int,), 1),
    "storm.zookeeper.root": ("/squall", (str,), None),
    "storm.zookeeper.session.timeout": (20000, (int,), 1),  # ms
    "storm.zookeeper.connection.timeout": (15000, (int,), 1),  # ms
    "storm.local.dir": ("squall-local", (str,), None),
    "storm.local.hostname": ("127.0.0.1", (str,), None),
    # Where clients find nimbus: "host:port" of every nimbus (any one answers).
    "nimbus.seeds": (["127.0.0.1:6627"], (list,), None),
    "nimbus.host": ("127.0.0.1", (str,), None),
    "nimbus.http.port": (6627, (int,), 0),
    "nimbus.monitor.freq.secs": (10, (int, float), 0.01),
    # How often every nimbus (standbys too) reads the workers' statistics into its windows.
    "nimbus.stats.freq.secs": (5, (int, float), 0.01),
    "nimbus.supervisor.timeout.secs": (60, (int, float), 0.01),
    "nimbus.task.timeout.secs": (30, (int, float), 0.01),
    "nimbus.task.launch.secs": (120, (int, float), 0.01),
    "nimbus.code.max.bytes": (16 * 1024 * 1024, (int,), 1),
    "supervisor.slots.ports": ([6700, 6701, 6702, 6703], (list,), None),
    # One worker is one GIL: its threads gain nothing from a second core and lose to the
    # cache and lock traffic of moving between cores.  Each worker is pinned to one core of
    # supervisor.cpu.cores (None: every core this supervisor may use), slot k to the k-th.
    "supervisor.worker.cpu.affinity": (True, (bool,), None),
    # Storm's key: each topology's workers run as a Unix user of their own, in a sandbox
    # (squall.runtime.sandbox), so that user code reaches nothing of the supervisor's or
    # another topology's.  None (the default): whenever the supervisor can (root, with
    # bubblewrap), saying at start why not otherwise; True: the supervisor refuses to
    # start without it; False: workers run as the supervisor's user.
    "supervisor.run.worker.as.user": (None, (bool, type(None)), None),
    # [first, last]: the uids (and gids of the same number) handed to topologies on a node;
    # no passwd entries needed.  Below nimbus.verify.uids.
    "supervisor.worker.uids": ([61184, 65399], (list,), None),
    # Host directories every sandboxed worker of the node sees as they are (read and write,
    # as Unix permissions allow), e.g. a data mount; nothing else outside its own is shown.
    "supervisor.worker.shared.dirs": ([], (list,), None),
    "supervisor.cpu.cores": (None, (list, type(None)), None),
    "supervisor.heartbeat.frequency.secs": (5, (int, float), 0.01),
    "supervisor.monitor.frequency.secs": (3, (int, float), 0.01),
    "supervisor.assignments.sync.secs": (10, (int, float), 0.01),
    "supervisor.worker.timeout.secs": (30, (int, float), 0.01),
    "supervisor.worker.start.timeout.secs": (120, (int, float), 0.01),
    # Longer than worker.shutdown.timeout.secs: an orderly stop is not cut short.
    "supervisor.worker.shutdown.sleep.secs": (6, (int, float), 0),
    # -- logs and the logviewer (squall.supervisor.logviewer) --------------------
    # Each supervisor serves its workers' logs (and its daemons', from storm.log.dir) on this
    # port, over nimbus's TLS and tokens; 0: one the OS picks (the UI and `squall logs` find
    # it in ZooKeeper); None: no logviewer.
    "logviewer.port": (8000, (int, type(None)), 0),
    # A worker's log (<storm.local.dir>/workers-artifacts/<topology id>/<port>/worker.log)
    # is rotated past this size: worker.log.1 is the newest of the rotated files.
    "supervisor.worker.log.max.bytes": (100 * 1024 * 1024, (int,), 1024),
    # Workers log readable lines (a trace as Python prints it); True: JSON lines, one per
    # event, for a log shipper.
    "supervisor.worker.log.json": (False, (bool,), None),
    # The most one worker's logs (the file and its rotated ones) and all of them may
    # take (MB), and how long a stopped worker's logs are kept (minutes): Storm's keys.
    "logviewer.max.per.worker.logs.size.mb": (2048, (int, float), 1),
    "logviewer.max.sum.worker.logs.size.mb": (4096, (int, float), 1),
    "logviewer.cleanup.age.mins": (10080, (int, float), 0),
    "logviewer.cleanup.interval.secs": (300, (int, float), 0.01),
    # Who may read every topology's logs besides nimbus.admins (a topology's own conf may
    # name more readers of its logs with the same key, as topology.users may read them).
    "logs.users": (None, (list, type(None)), None),
    # The daemons' own log files, which the logviewer serves to nimbus.admins and logs.users
    # (/api/v1/daemonlog); None: none served.
    "storm.log.dir": (None, (str, type(None)), None),
    # -- DRPC (squall.drpc, the server squall.drpc_server; docs/drpc.md) -----------------
    # Where DRPC servers run (host names): clients call one, every DRPCSpout fetches from
    # them (a topology may set its own).  None: no servers configured.
    "drpc.servers": (None, (list, type(None)), None),
    # A DRPC server's HTTP(S) port, for clients (Storm's form: GET /drpc/<function>/<args>,
    # POST /drpc/<function>) and for the topologies' spouts alike (Storm's thrift ports 3772
    # and 3773 and its HTTP port 3774 in one); 0: one the OS picks.
    "drpc.port": (3772, (int,), 0),
    # A request not answered within this long fails with SERVER_TIMEOUT (Storm's key).
    "drpc.request.timeout.secs": (600, (int, float), 0.001),
    # Requests a server holds open at once (clients waiting for their result, spouts
    # waiting for a request); past it one is answered 503 at once.
    "drpc.max.requests": (1024, (int,), 1),
    # The largest arguments or result a server takes (bytes; Storm's drpc.max_buffer_size).
    "drpc.max_buffer_size": (1048576, (int,), 1),
    # Storm's drpc.authorizer.acl, inline: {function: {"client.users": [user, ...]}}; a
    # function named here may be called only by those users (and nimbus.admins), any
    # other by every authenticated user.  None: every authenticated user, every function.
    "drpc.authorizer.acl": (None, (dict, type(None)), None),
    # -- Redis (squall.contrib.redis) -------------------------------------------
    # The Redis that spouts, sinks and stores use when their spec gives no url=
    # ("redis://[:password@]host:port/db"; passwords are redacted in messages).
    "redis.url": (None, (str, type(None)), None),
    # -- Spark bolt (squall.spark) -------------------------------------------
    # A batch goes to Spark when it holds this many tuples,
    "spark.bolt.batch.size": (1000, (int,), 1),
    # when its oldest tuple is this old (ms), or on a tick tuple.
    "spark.bolt.batch.ms": (500, (int, float), 1),
    # While a job runs, the next batch keeps filling up to this many tuples
    # (None: 4 x batch.size); then the bolt waits for the job (backpressure).
    "spark.bolt.batch.max.size": (None, (int, type(None)), 1),
    # What one batch is expected to cost in Spark (ms): the submit-time check
    # warns when batch.ms + 2 x this comes near topology.message.timeout.secs.
    "spark.bolt.expected.job.ms": (300, (int, float), 0),
    # A Spark Connect server of the user's ("sc://host:port/;token=..."); wins
    # over the node's server.
    "spark.remote": (None, (str, type(None)), None),
    # The node's server: set by the supervisor in each worker's conf.
    "spark.node.remote": (None, (str, type(None)), None),
    # Connect client retries before a call fails: a dead server fails the
    # batch in seconds instead of stalling the bolt for pyspark's 10 minutes.
    "spark.client.max.retries": (5, (int,), 0),
    # Servers Squall starts (supervisor, local mode): their master, extra
    # --conf settings, and how long they may take to answer a first query.
    "spark.master": ("local[*]", (str,), None),
    "spark.connect.server.conf": ({}, (dict,), None),
    "spark.connect.server.start.timeout.secs": (180, (int, float), 1),
    # The supervisor runs the node's Spark Connect server (a JVM) only if asked;
    # port 0 picks a free port once and keeps it in storm.local.dir.
    "supervisor.spark.connect.enabled": (False, (bool,), None),
    "supervisor.spark.connect.port": (15002, (int,), 0),
}

DEFAULTS: dict[str, Any] = {key: spec[0] for key, spec in _SPEC.items()}


def validate(conf: Mapping[str, Any]) -> None:
    """Raise :class:`ConfigError` naming the first ill-typed known key."""
    for key, value in conf.items():
        if not isinstance(key, str):
            msg = f"config keys must be strings, got {key!r}"
            raise ConfigError(msg)
        spec = _SPEC.get(key)
        if spec is None:
            continue
        _default, types, lower = spec
        # bool is an int in Python; never accept it for a numeric key.
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            names = " or ".join("None" if t is type(None) else t.__name__ for t in types)
            msg = f"config {key!r} must be {names}, got {value!r}"
            raise ConfigError(msg)
        if lower is not None and value is not None and value < lower:
            msg = f"config {key!r} must be >= {lower}, got {value!r}"
            raise ConfigError(msg)


def misspelled(conf: Mapping[str, Any]) -> list[str]:
    """A warning for each key Squall does not know that is one slip from one it does
    (``topology.max.spout.pendng``): it would run silently with the default.  Keys of a
    user's own (``myapp.batch``) are left alone; so is anything not that close."""
    import difflib

    out = []
    for key in conf:
        if isinstance(key, str) and key not in _SPEC:
            close = difflib.get_close_matches(key, list(_SPEC), n=1, cutoff=0.9)
            if close:
                out.append(f"unknown config key {key!r}: did you mean {close[0]!r}? "
                           f"(as written it is ignored, and {close[0]} is {DEFAULTS[close[0]]!r})")
    return out


def merge(*layers: Mapping[str, Any] | None) -> dict[str, Any]:
    """Defaults, then each layer in order (later wins); validated."""
    conf = dict(DEFAULTS)
    for layer in layers:
        if layer:
            validate(layer)
            conf.update(layer)
    return conf
