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
    "topology.spout.yield.queued.tuples": (1000, (int,), 0),
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
    # -- Trident streams read from a plain Spout (squall.trident.rich_spout) ---------
    # Storm's RichSpoutBatchExecutor keys and defaults: the most tuples a batch takes,
    # and the least time between two new batches (the spout cannot say it has tuples).
    "topology.spout.max.batch.size": (1000, (int,), 1),
    "topology.trident.batch.emit.interval.millis": (500, (int, float), 0),
    # A component's own key (spec(config=...)): its executor j runs in the worker of
    # executor j of the named component (squall.worker.plan.colocations).
    "topology.colocate.with": (None, (str, type(None)), None),
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
    # -- security (squall.security; docs/security.md) --------------------------
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
    # Of those, how many one user may have open at once (past it: 429 at once), so that one
    # user's slow requests never hold every place.
    "nimbus.http.max.connections.per.user": (8, (int,), 1),
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
    # Files `squall submit` packs besides what the topology imports and its shell
    # components run: glob patterns relative to the project root (`--include` adds more).
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
    # -- topologies' own environments (squall.runtime.envbuild, docs/dependencies.md) ----
    "supervisor.env.cache.grace.secs": (600, (int, float), 0),
    "supervisor.env.build.timeout.secs": (900, (int, float), 1),
    # Building an environment runs code the submitter chose, so a cluster (nimbus and every
    # supervisor, each from its own conf: never a topology's) builds only wheels from its
    # index (pip's own config: /etc/pip.conf) unless these list more: kinds of "sdist",
    # "url", "vcs", "index" (a requirements file's own -i/--extra-index-url/--find-links
    # URL/--trusted-host) and "editable"; directories a requirement's local path (a wheel,
    # a --find-links directory, a source) must lie under.
    "squall.env.build.allow": ([], (list,), None),
    "squall.env.build.paths": ([], (list,), None),
    # A daemon as root runs each build (pip, in a sandbox with the network) as a uid of
    # [first, last] of its own, so at most that many at once; above nimbus.verify.uids.
    "squall.env.build.uids": ([65464, 65495], (list,), None),
    # The only environment variables a build gets besides its own fixed few (an index's
    # address, a proxy): never the daemon's environment.  A build that runs user code
    # (an allowed sdist) can read them.
    "squall.env.build.environment": ({}, (dict,), None),
    # Nimbus builds at most this many environments at once for one user, and in all; a
    # submit past either is refused at once (429) rather than waiting on a request slot.
    # A cached environment needs no build.  The environments of one user's topologies
    # may take at most this many bytes on nimbus (0: no cap).
    "nimbus.env.builds.per.user": (2, (int,), 1),
    "nimbus.env.builds.max": (4, (int,), 1),
    "nimbus.env.max.bytes.per.user": (20 * 1024 ** 3, (int,), 0),
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
    # How many requests one user may have open at one logviewer at once (a download holds
    # its place until its last byte); past it: 429 at once.
    "logviewer.max.requests.per.user": (4, (int,), 1),
    # How long a token nimbus mints for reading one logviewer (squall.security.logtokens) is
    # valid.  Nimbus's clock and the supervisors' must agree far better than this (NTP).
    "logviewer.token.validity.secs": (300, (int, float), 1),
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
    # Calls one user may have waiting at a server at once; the next is answered 429 at once
    # (squall.drpc_server.limits).  Keep it below drpc.max.requests.
    "drpc.max.pending.per.user": (128, (int,), 1),
    # Calls all users together may have waiting for functions no topology serves (none
    # fetched within the last minute); the next such call is answered 429 at once.
    "drpc.max.pending.unserved": (256, (int,), 0),
    # A DRPC function belongs to the user whose topology first fetched it (unless
    # drpc.authorizer.acl names its invocation.user): released this long after that user's
    # last topology serving it is gone, so a redeploy keeps it (squall.drpc_server.ownership).
    "drpc.function.release.secs": (600, (int, float), 0),
    # The most DRPC functions one user's topologies may hold at once.
    "drpc.max.functions.per.user": (256, (int,), 1),
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

# What each key means, one line each: docs/config.md, the configuration reference, is
# generated from this table and DEFAULTS (`python -m squall.config --markdown docs/config.md`),
# and tests/test_config_reference.py fails when a key has no line here or the page is stale.
DESCRIPTIONS: dict[str, str] = {
    # -- topologies: the engine ---------------------------------------------------------
    "topology.workers": "Worker processes the topology runs in (one Python process and one GIL each).",
    "topology.acker.executors": "Acker executors; null: one per worker; 0: no tracking (at most once, "
                                "spouts are acked at once).",
    "topology.message.timeout.secs": "A spout tuple's tree not fully acked within this many seconds fails "
                                     "(and is replayed by a reliable spout).",
    "topology.max.spout.pending": "Tuple trees a spout task may have in flight before next_tuple stops "
                                  "being called; null: no limit.",
    "topology.max.spout.pending.autotune": "Let the Storm@Twitter paper's tuner set each spout's max spout "
                                           "pending from its progress.",
    "topology.max.spout.pending.autotune.secs": "The tuner's period (the paper's t): the progress made over "
                                                "it is what the tuner compares.",
    "topology.max.spout.pending.autotune.class": "The tuner, \"module:Class\" "
                                                 "(__init__(initial), auto_tune(delta_progress), get()).",
    "topology.max.spout.pending.autotune.latency.ms": "A p99 complete latency (ms) the tuner keeps under "
                                                      "first, then chases throughput within it; null: "
                                                      "throughput only.",
    "topology.max.spout.pending.autotune.tolerance": "How close two periods' progress must be to count as "
                                                     "similar, a fraction of the last; raise it where "
                                                     "throughput is noisy.",
    "topology.tick.tuple.freq.secs": "Seconds between __tick tuples to each bolt task (process_tick); null: "
                                     "no ticks.  Per component through spec(config=...).",
    "topology.debug": "Storm's debug switch; Squall reads it only in its multilang child adapter, whose "
                      "logger then shows debug lines.",
    "topology.disable.loadaware.messaging": "true: shuffle spreads evenly over every target task, ignoring "
                                            "locality and load.",
    "topology.localityaware.higher.bound": "Shuffle widens from the worker's own tasks to every task when "
                                           "the local ones' load passes this (0-1).",
    "topology.localityaware.lower.bound": "Shuffle narrows back to the worker's own tasks when their load "
                                          "falls below this (0-1).",
    "topology.executor.receive.buffer.size": "Capacity of an executor's input queue, in tuples; above it "
                                             "the spouts pause (backpressure).",
    "topology.transfer.buffer.size": "Capacity of a worker's transfer queue (messages waiting for its send "
                                     "thread); above it the worker counts as congested.",
    "topology.spout.yield.queued.tuples": "A spout holds back while its worker's bolts have more than this "
                                          "many tuples queued; 0: never.",
    "topology.spout.batch.size": "Times a spout's next_tuple runs in one turn before its output is flushed.",
    "topology.sleep.spout.wait.strategy.time.ms": "How long a spout sleeps when next_tuple emitted nothing "
                                                  "(woken at once by acks and fails).",
    "topology.max.error.report.per.interval": "Errors a task reports per throttle interval; the rest are "
                                              "only counted.",
    "topology.error.throttle.interval.secs": "The interval of topology.max.error.report.per.interval.",
    "topology.testing.always.try.serialize": "Serialize every emitted value as the wire would, not only "
                                             "values of unusual types (tests).",
    "topology.auto.task.hooks": "Storm's task hooks: accepted so Storm configs load, but Squall runs no "
                                "task hooks.",
    "topology.environment": "Environment variables added to the topology's worker processes.",
    "topology.users": "Users besides the submitter who may kill, rebalance, activate and deactivate the "
                      "topology.",
    "topology.secret.keys": "Config keys whose values are shown as ***** in answers and logs (besides "
                            "*.password, *.token, *.secret, ...).",
    "topology.package.include": "Glob patterns (relative to the topology file's directory) of what squall "
                                "submit packs; null: all but dotfiles, VCS dirs, virtualenvs, key files.",
    # -- topologies: multilang ----------------------------------------------------------
    "topology.multilang.serializer": "The multilang children's serializer: Storm's JSON, or "
                                     "com.yelp.pyleus.serializer.MessagePackSerializer (pystorm's msgpack).",
    "topology.subprocess.timeout.secs": "A multilang child silent this long (no heartbeat answer) is "
                                        "killed and restarted; null: supervisor.worker.timeout.secs.",
    "topology.shellbolt.max.pending": "Tuples a shell bolt sends its child before waiting for it to "
                                      "catch up.",
    "topology.multilang.resources.dir": "The directory multilang children run in, unless their spec gives "
                                        "cwd=; null: resources/ beside the topology file, else its "
                                        "directory.",
    "topology.multilang.tap.dir": "A directory where every multilang child's bytes are recorded, for "
                                  "debugging the protocol; null: none.",
    "topology.multilang.max.message.bytes": "The largest message a multilang child may send; past it the "
                                            "child is faulted and restarted.",
    # -- topologies: transactional and stateful -----------------------------------------
    "topology.transactional.id": "The key of a transactional topology's state; null: the topology's "
                                 "name.",
    "topology.spout.max.batch.size": "A Trident stream read from a plain Spout: the most tuples one batch "
                                     "takes from it (next_tuple is called until then, or until a call "
                                     "emits nothing).",
    "topology.trident.batch.emit.interval.millis": "A Trident stream read from a plain Spout: the least "
                                                   "time between the starts of two new batches (empty "
                                                   "or not; replays are not held back).",
    "topology.colocate.with": "A component's own setting: the name of another component with as many "
                              "executors; executor j of both runs in one worker, also after a "
                              "reschedule. Trident sets it on a state_query's bolt, so that a state "
                              "kept in a worker's memory or on its node is read where it is written.",
    "topology.state.provider": "Where stateful bolts' checkpoints live: sqlite (one machine), redis or "
                               "memory (lost with the worker).",
    "topology.state.provider.config": "The provider's settings, a map or its JSON text: {\"path\": ...} "
                                      "for sqlite, {\"url\": ...} for redis.",
    "topology.state.checkpoint.interval.ms": "How often a checkpoint starts (ms); must stay below the "
                                             "message timeout.",
    "transactional.zookeeper.root": "The ZooKeeper node under which transactional topologies keep their "
                                    "state.",
    "transactional.zookeeper.servers": "Another ZooKeeper ensemble for transactional state; null: "
                                       "storm.zookeeper.servers.",
    "transactional.zookeeper.port": "The port of transactional.zookeeper.servers; null: "
                                    "storm.zookeeper.port.",
    "squall.state.dir": "Where SQLite state files go (<dir>/<topology>.sqlite); null: ~/.squall/state.",
    # -- Redis and Spark ----------------------------------------------------------------
    # -- DRPC ------------------------------------------------------------------------------
    "drpc.servers": "The DRPC servers' hosts, which DRPC clients call and DRPC spouts fetch requests from.",
    "drpc.port": "A DRPC server's HTTP(S) port on storm.local.hostname, for clients and topologies alike "
                 "(0: one the OS picks).",
    "drpc.request.timeout.secs": "A DRPC request not answered within this long fails (SERVER_TIMEOUT).",
    "drpc.max.requests": "Requests a DRPC server holds open at once; past it one is answered 503.",
    "drpc.max_buffer_size": "The largest arguments or result a DRPC server takes (bytes).",
    "drpc.authorizer.acl": "Who may call and who serves which DRPC function: {function: {client.users: "
                           "[...], invocation.user: NAME}}; a function it does not name is called by every "
                           "authenticated user and served by the topologies of the user who first serves it.",
    "drpc.max.pending.per.user": "Calls one user may have waiting at a DRPC server at once; past it a call "
                                 "is answered 429 at once.",
    "drpc.max.pending.unserved": "Calls all users together may have waiting at a DRPC server for functions "
                                 "no topology serves; past it such a call is answered 429 at once.",
    "drpc.function.release.secs": "How long a DRPC function stays its owner's (the user whose topology first "
                                  "fetched it) once none of that user's topologies serving it is left.",
    "drpc.max.functions.per.user": "The most DRPC functions one user's topologies may hold at once.",
    # -- logs and the logviewer ----------------------------------------------------------
    "logviewer.port": "The port of each supervisor's logviewer, on storm.local.hostname, which serves its "
                      "workers' and daemons' logs over nimbus's TLS and tokens (0: one the OS picks, "
                      "found through ZooKeeper; null: none).",
    "supervisor.worker.log.max.bytes": "A worker's log (workers-artifacts/<topology id>/<port>/worker.log) "
                                       "rotates past this size.",
    "supervisor.worker.log.json": "Workers log JSON lines, one per event, instead of readable lines.",
    "logviewer.max.per.worker.logs.size.mb": "The most one worker's log and its rotated files take; the "
                                             "oldest rotated files go first.",
    "logviewer.max.sum.worker.logs.size.mb": "The most all stopped workers' logs on a node take; the oldest "
                                             "go first.",
    "logviewer.cleanup.age.mins": "A stopped worker's logs are removed this long after their last line.",
    "logviewer.cleanup.interval.secs": "How often a supervisor looks for logs to remove.",
    "logviewer.max.requests.per.user": "Requests one user may have open at one logviewer at once (a "
                                       "download holds its place until its last byte); past it 429 at once.",
    "logviewer.token.validity.secs": "How long a token nimbus mints for one user and one logviewer is valid; "
                                     "the logviewers take no other token.",
    "logs.users": "Who may read every topology's logs besides nimbus.admins (in a topology's conf: who may "
                  "read its logs).",
    "storm.log.dir": "The daemons' log files the logviewer serves to nimbus.admins and logs.users.",
    "redis.url": "The Redis that spouts, sinks and stores use when their spec gives no url= "
                 "(redis://[:password@]host:port/db).",
    "spark.bolt.batch.size": "A Spark bolt sends its batch to Spark when it holds this many tuples.",
    "spark.bolt.batch.ms": "A Spark bolt sends its batch when its oldest tuple is this old (ms), or on a "
                           "tick tuple, if it did not fill up first.",
    "spark.bolt.batch.max.size": "While a Spark job runs, the next batch fills up to this many tuples, then "
                                 "the bolt waits; null: 4 x spark.bolt.batch.size.",
    "spark.bolt.expected.job.ms": "What one batch is expected to cost in Spark (ms); submit warns when "
                                  "batch.ms + 2 x this nears the message timeout.",
    "spark.remote": "A Spark Connect server of your own (sc://host:port/;token=...); wins over the "
                    "node's.",
    "spark.node.remote": "The node's Spark Connect server, set by the supervisor in each worker's config "
                         "(not by users).",
    "spark.client.max.retries": "Spark Connect client retries before a call fails (a dead server fails the "
                                "batch in seconds).",
    "spark.master": "The master of Spark Connect servers Squall starts (supervisor, local mode).",
    "spark.connect.server.conf": "Extra --conf settings for the Spark Connect servers Squall starts.",
    "spark.connect.server.start.timeout.secs": "How long a Spark Connect server Squall starts may take to "
                                               "answer a first query.",
    # -- workers --------------------------------------------------------------------------
    "worker.shutdown.timeout.secs": "How long a stopping worker waits for its executors to finish in "
                                    "order.",
    "worker.gc.gen0.threshold": "The garbage collector's generation-0 threshold in workers; 0: Python's "
                                "own, and no heap freeze.",
    "worker.heartbeat.frequency.secs": "How often a worker process rewrites its heartbeat for its "
                                       "supervisor.",
    "worker.assignment.poll.secs": "How often a worker process checks its assignment for changes.",
    "worker.backpressure.resend.secs": "How often a congested worker repeats so to its peers (they forget "
                                       "it after 3 periods).",
    "squall.worker.dir": "Set by a worker process to its own directory (not by users): multilang pid files "
                         "go in <dir>/pids.",
    "zmq.hwm": "Frames a worker's ZeroMQ socket queues for one peer before dropping new ones.",
    "zmq.max.message.bytes": "The largest frame a worker accepts from a peer; ZeroMQ refuses bigger ones "
                             "before buffering them.",
    # -- supervisors ----------------------------------------------------------------------
    "supervisor.slots.ports": "The supervisor's worker slots: one port per worker process.",
    "supervisor.worker.restart.backoff.initial.secs": "The first wait before restarting a worker (or "
                                                      "multilang child) that died; it doubles while it "
                                                      "keeps dying.",
    "supervisor.worker.restart.backoff.max.secs": "The longest wait between restarts of a worker (or "
                                                  "multilang child) that keeps dying.",
    "supervisor.worker.cpu.affinity": "Pin each worker to one core of supervisor.cpu.cores (slot k to the "
                                      "k-th).",
    "supervisor.cpu.cores": "The cores this supervisor may give its workers; null: every core it may use.",
    "supervisor.run.worker.as.user": "Workers run as the topology's own uid in a sandbox: null whenever "
                                     "the supervisor can, true or refuse to start, false never.",
    "supervisor.worker.uids": "[first, last]: the uids (and gids) handed to topologies on a node; no passwd "
                              "entries needed.",
    "supervisor.worker.shared.dirs": "Host directories every sandboxed worker of the node sees (a data "
                                     "mount, say).",
    "supervisor.worker.env.allow": "Environment variables of the supervisor's that workers inherit.",
    "supervisor.heartbeat.frequency.secs": "How often the supervisor refreshes its node's heartbeat in "
                                           "ZooKeeper.",
    "supervisor.monitor.frequency.secs": "How often the supervisor checks its workers (alive, timed out, "
                                         "not started) and (re)launches them.",
    "supervisor.assignments.sync.secs": "How often the supervisor reads its assignments (and fetches new "
                                        "topologies' code).",
    "supervisor.worker.timeout.secs": "A worker whose heartbeat is this old is killed and restarted.",
    "supervisor.env.cache.grace.secs": "A topology's environment (<storm.local.dir>/envs/<hash>, built "
                                       "from its --requirements) that no topology on the node uses is "
                                       "removed after this many seconds; nimbus keeps its own cache by the "
                                       "same rule.",
    "squall.env.build.allow": "What builds a cluster runs besides wheels from its index: any of sdist, url, "
                              "vcs, index, editable (docs/dependencies.md); the cluster's conf only.",
    "squall.env.build.paths": "Directories a requirement's local path (wheel, --find-links directory, "
                              "source) must lie under; the cluster's conf only.",
    "squall.env.build.uids": "[first, last]: the uids a daemon as root runs environment builds (pip) as, "
                             "one per build at once.",
    "squall.env.build.environment": "Environment variables every environment build gets (an index URL, a "
                                    "proxy); never the daemon's own.",
    "nimbus.env.builds.per.user": "Environment builds nimbus runs at once for one user; a submit needing "
                                  "one more is refused at once (429).",
    "nimbus.env.builds.max": "Environment builds nimbus runs at once in all; a submit needing one more is "
                             "refused at once (429).",
    "nimbus.env.max.bytes.per.user": "Bytes the environments of one user's topologies may take on nimbus; "
                                     "a build past it is refused (0: no cap).",
    "supervisor.env.build.timeout.secs": "How long building one topology environment (pip install) may take, "
                                         "on nimbus and on a supervisor, before it counts as failed.",
    "supervisor.worker.start.timeout.secs": "How long a starting worker has to send its first heartbeat.",
    "supervisor.worker.shutdown.sleep.secs": "How long the supervisor waits for a worker it stops before "
                                             "killing it.",
    "supervisor.spark.connect.enabled": "The supervisor runs the node's Spark Connect server (a JVM).",
    "supervisor.spark.connect.port": "The port of the node's Spark Connect server; 0: a free port, picked "
                                     "once and kept.",
    # -- nimbus ---------------------------------------------------------------------------
    "nimbus.seeds": "Where clients find nimbus: host:port of every nimbus (any one answers).",
    "nimbus.host": "The address nimbus's HTTPS API and UI listen on (it advertises storm.local.hostname, "
                   "which should reach it).",
    "nimbus.http.port": "The port of nimbus's HTTPS API and UI.",
    "nimbus.monitor.freq.secs": "How often the leader compares assignments with heartbeats and reassigns "
                                "what died.",
    "nimbus.stats.freq.secs": "How often every nimbus (standbys too) reads the workers' statistics into its "
                              "windows.",
    "nimbus.supervisor.timeout.secs": "Storm's key, accepted so Storm configs load; Squall uses "
                                      "nimbus.task.timeout.secs for a silent supervisor.",
    "nimbus.task.timeout.secs": "A worker (or a supervisor) silent this long loses its executors to other "
                                "slots.",
    "nimbus.task.launch.secs": "How long a newly assigned worker has to send its first heartbeat.",
    "nimbus.code.max.bytes": "The largest code package nimbus accepts, compressed.",
    "nimbus.code.max.uncompressed.bytes": "The largest a code package may be once unzipped.",
    "nimbus.code.max.entries": "The most files a code package may hold.",
    "nimbus.slots.perTopology": "The most workers one topology may ask for.",
    "nimbus.executors.perTopology": "The most executors one topology may ask for.",
    "nimbus.tasks.perTopology": "The most tasks one topology may ask for.",
    "nimbus.verify.sandbox": "Importing a submitted package to check it: auto (in a sandbox where "
                             "bubblewrap works, else not at all), required or off.",
    "nimbus.verify.uids": "[first, last]: the uids nimbus as root runs verifications as.",
    "nimbus.verify.timeout.secs": "How long one verification may take before its sandbox is killed.",
    "nimbus.http.max.connections": "Requests with a valid token served at once; the next is answered 503 "
                                   "at once.",
    "nimbus.http.max.connections.per.user": "Requests one user may have open at nimbus at once; the next is "
                                            "answered 429 at once.",
    "nimbus.http.timeout.secs": "How long a request may take to send its headers and body.",
    "nimbus.http.handshake.timeout.secs": "How long a connection without a valid token yet may stay open.",
    "nimbus.http.max.pending.per.address": "Connections without a valid token yet from one address; past "
                                           "it the oldest is turned away.",
    "nimbus.http.max.pending": "Connections without a valid token yet, over all addresses; past it the "
                               "oldest is turned away.",
    # -- security ---------------------------------------------------------------------------
    "squall.secure": "TLS and tokens for nimbus, CURVE between workers, ACLs in ZooKeeper; false only for "
                     "a dev cluster started with --insecure.",
    "squall.keyring.path": "The keyring (squall secrets init); null: $SQUALL_KEYRING, else "
                           "~/.squall/keyring.json.",
    "nimbus.tls.cert.path": "Nimbus's certificate (PEM); null: the keyring's, signed by its CA.",
    "nimbus.tls.key.path": "Nimbus's private key (PEM); null: the keyring's.",
    "nimbus.tls.ca.path": "What clients trust for nimbus's certificate; null: the keyring's CA.",
    "nimbus.admins": "Users who may do anything.",
    "nimbus.users": "Users who may submit; null: every user with a token.",
    "nimbus.readonly.users": "Users who may only read.",
    # -- ZooKeeper and the node -------------------------------------------------------------
    "storm.zookeeper.servers": "The ZooKeeper ensemble's hosts.",
    "storm.zookeeper.port": "The ZooKeeper ensemble's port.",
    "storm.zookeeper.root": "The node under which Squall keeps the cluster's state.",
    "storm.zookeeper.session.timeout": "The ZooKeeper session timeout (ms).",
    "storm.zookeeper.connection.timeout": "How long a daemon waits to connect to ZooKeeper (ms).",
    "storm.local.dir": "A supervisor's own directory: its node id, topologies' code, its worker "
                       "slots, sandboxed state, the node's Spark Connect files.",
    "storm.local.hostname": "This node's address, never assumed to be 127.0.0.1 elsewhere: its supervisor "
                            "registers it and its workers listen and are reached on it, its logviewer "
                            "and DRPC server listen on it, a nimbus advertises it to clients and "
                            "standbys, and `squall dev-zookeeper` listens on it unless given --host.",
}


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


# -- the reference page (docs/config.md) --------------------------------------------------

REFERENCE_PAGE = "docs/config.md"
REGENERATE = f"python -m squall.config --markdown {REFERENCE_PAGE}"
# Sections of the page, by a key's first word, in this order; a new first word gets a
# section of its own after these.
_SECTIONS = {
    "topology": "Topologies (`topology.*`): in a topology's `config`, `spec(config=...)` or `--conf`",
    "transactional": "Transactional state (`transactional.*`)",
    "redis": "Redis (`redis.*`)",
    "spark": "The Spark bolt (`spark.*`)",
    "worker": "Worker processes (`worker.*`)",
    "zmq": "Between workers (`zmq.*`)",
    "supervisor": "Supervisors (`supervisor.*`)",
    "nimbus": "Nimbus (`nimbus.*`)",
    "storm": "ZooKeeper and the node (`storm.*`)",
    "squall": "Squall's own (`squall.*`)",
}
_TYPE_NAMES = {int: "int", float: "number", str: "string", bool: "bool", list: "list", dict: "map",
               type(None): "null"}


def _kind(types: tuple[type, ...], lower: float | None) -> str:
    names = [_TYPE_NAMES[t] for t in types if not (t is int and float in types)]
    kind = " or ".join(names)
    if lower is not None:
        kind += f", >= {int(lower) if float(lower).is_integer() else lower}"
    return kind


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def reference_markdown() -> str:
    """docs/config.md: every key with its default, type and meaning, from _SPEC and DESCRIPTIONS."""
    import json

    by_section: dict[str, list[str]] = {}
    for key in sorted(_SPEC):
        by_section.setdefault(key.split(".", 1)[0], []).append(key)
    order = [s for s in _SECTIONS if s in by_section] + sorted(set(by_section) - set(_SECTIONS))
    lines = [
        "# Configuration reference",
        "",
        f"<!-- Generated from squall/config.py by `{REGENERATE}`: edit the",
        "     descriptions there (DESCRIPTIONS), not this page. -->",
        "",
        "Every key Squall reads, with its default.  Keys are Storm's names where Storm has the",
        "setting.  A config is layered: these defaults, then `squall.yaml` (daemons and client",
        "commands: `--config`, `$SQUALL_CONF`, `./squall.yaml` or the running dev cluster's), then",
        "the topology class's `config`, then `--conf KEY=VALUE` at `squall submit` or `squall",
        "local`; a component's `spec(config={...})` wins over all of them for that component.",
        "A known key with a value of the wrong type or below its bound is refused, naming the",
        "key; a key Squall does not know is passed through to components (as in Storm), with a",
        "did-you-mean warning when it is one slip from a known one.  Defaults are written as",
        "YAML/JSON (`null` is Python's `None`).",
        "",
    ]
    for section in order:
        lines += [f"## {_SECTIONS.get(section, f'`{section}.*`')}", "",
                  "| key | default | type | meaning |", "|---|---|---|---|"]
        for key in by_section[section]:
            default, types, lower = _SPEC[key]
            shown = json.dumps(default)
            lines.append(f"| `{key}` | `{_cell(shown)}` | {_kind(types, lower)} | "
                         f"{_cell(DESCRIPTIONS.get(key, '(undocumented)'))} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse
    from pathlib import Path

    parser = argparse.ArgumentParser(prog="python -m squall.config",
                                     description="Squall's configuration keys and their defaults.")
    parser.add_argument("--markdown", metavar="PATH", nargs="?", const="-",
                        help=f"write the reference page to PATH (e.g. {REFERENCE_PAGE}); - or none: stdout")
    args = parser.parse_args(argv)
    if args.markdown is None:
        parser.print_help()
        return 2
    page = reference_markdown()
    if args.markdown == "-":
        print(page, end="")
    else:
        Path(args.markdown).write_text(page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
