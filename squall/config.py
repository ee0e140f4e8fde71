"""Configuration: Storm's key names, defaults in one place, checked once.

A config is a plain ``dict`` keyed by Storm's dotted names.  Users may add
keys of their own (Storm passes unknown keys through to components), but a
known key with a value of the wrong type is refused with a clear error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from squall.errors import ConfigError

WORKER_DIR = "squall.worker.dir"
WORKER_PIDS = "pids"  # the multilang pid files' directory, under the worker's


class Key(NamedTuple):
    """A known key: its default, the types a value may have, the least value allowed
    (None: no bound) and what it means, one line for docs/config.md."""

    default: Any
    types: tuple[type, ...]
    lower: float | None
    meaning: str


# Every key Squall reads.  docs/config.md, the configuration reference, is generated from
# this table (`python -m squall.config --markdown docs/config.md`), and
# tests/test_config_reference.py fails when a key has no meaning or the page is stale.
KEYS: dict[str, Key] = {
    "topology.workers": Key(1, (int,), 1,
        "Worker processes the topology runs in (one Python process and one GIL each)."),
    # None means one acker executor per worker, as in Storm.
    "topology.acker.executors": Key(None, (int, type(None)), 0,
        "Acker executors; null: one per worker; 0: no tracking (at most once, spouts are acked at once)."),
    "topology.message.timeout.secs": Key(30, (int, float), 0.001,
        "A spout tuple's tree not fully acked within this many seconds fails (and is replayed by a "
        "reliable spout)."),
    "topology.max.spout.pending": Key(None, (int, type(None)), 1,
        "Tuple trees a spout task may have in flight before next_tuple stops being called; null: no limit."),
    # The Storm@Twitter paper's tuner (§3.3.3, squall.tuning): every .secs (the paper's t) a
    # spout executor hands it the progress made since, and takes its max spout pending.
    "topology.max.spout.pending.autotune": Key(False, (bool,), None,
        "Let the Storm@Twitter paper's tuner set each spout's max spout pending from its progress."),
    "topology.max.spout.pending.autotune.secs": Key(120, (int, float), 0.01,
        "The tuner's period (the paper's t): the progress made over it is what the tuner compares."),
    "topology.max.spout.pending.autotune.class": Key("squall.tuning.autotune:PaperTuner", (str,), None,
        "The tuner, \"module:Class\" (__init__(initial), auto_tune(delta_progress), get())."),
    # Beyond the paper: a complete latency (ms) to keep under, trading at most a few percent of
    # throughput (squall.tuning.autotune.LatencyTargetTuner); None: throughput only.
    "topology.max.spout.pending.autotune.latency.ms": Key(None, (int, float, type(None)), 0.001,
        "A p99 complete latency (ms) the tuner keeps under first, then chases throughput within it; null: "
        "throughput only."),
    # How close two periods' progress must be to count as "similar" (the paper leaves it open):
    # a fraction of the last; raise it where throughput is noisy (shared machines, VMs).
    "topology.max.spout.pending.autotune.tolerance": Key(0.05, (int, float), 0,
        "How close two periods' progress must be to count as similar, a fraction of the last; raise it "
        "where throughput is noisy."),
    # Self-regulation (Heron's Dhalion; squall.tuning.regulator): nimbus sizes the topology
    # itself through the rebalance operators use, keeps why in an action log, and undoes an
    # action that did not help.
    "topology.autoscale": Key(False, (bool,), None,
        "true: nimbus sizes the topology itself (executors, workers, max spout pending) and logs why "
        "(`squall autoscale log NAME`); switched at run time with `squall autoscale enable|disable NAME`."),
    "topology.autoscale.period.secs": Key(30, (int, float), 0.1,
        "Seconds in a self-regulation round: the rates each decision reads are over one round."),
    "topology.autoscale.rounds": Key(3, (int,), 1,
        "Rounds a symptom (a bolt overloaded, a latency over target) must last before anything is done."),
    "topology.autoscale.quiet.rounds": Key(10, (int,), 1,
        "Rounds a bolt must idle (capacity under topology.autoscale.capacity.low) before it is scaled down."),
    "topology.autoscale.settle.rounds": Key(3, (int,), 1,
        "Rounds in the new shape after an action before it is judged (kept, or undone)."),
    "topology.autoscale.cooldown.secs": Key(600, (int, float), 0,
        "An action undone (it did not help) is not tried again for this long."),
    "topology.autoscale.capacity.high": Key(0.8, (int, float), 0.01,
        "A bolt whose busiest executor's capacity stays at or over this is overloaded."),
    "topology.autoscale.capacity.low": Key(0.25, (int, float), 0,
        "A bolt whose executors' capacity stays under this for the quiet rounds is over-provisioned."),
    "topology.autoscale.capacity.target": Key(0.6, (int, float), 0.01,
        "The capacity a scaled bolt's executors are sized for."),
    "topology.autoscale.max.workers": Key(None, (int, type(None)), 1,
        "The most workers self-regulation gives the topology; null: nimbus.slots.perTopology."),
    "topology.autoscale.latency.p99.ms": Key(None, (int, float, type(None)), 0.001,
        "A p99 complete latency target: self-regulation moves max spout pending towards it; "
        "null: no target."),
    "topology.tick.tuple.freq.secs": Key(None, (int, float, type(None)), 0.001,
        "Seconds between __tick tuples to each bolt task (process_tick); null: no ticks.  Per component "
        "through spec(config=...)."),
    "topology.debug": Key(False, (bool,), None,
        "Storm's debug switch: true writes every tuple the topology (or, in a component's own conf, that "
        "component) emits to its worker's events.log until a debug action says otherwise; Squall's "
        "multilang child adapter also shows debug lines."),
    # Storm's event logger bolts; Squall's event logger lives in each worker (squall.worker.event_log).
    "topology.eventlogger.executors": Key(None, (int, type(None)), 0,
        "Storm's event logger executors; Squall has one event logger in each worker instead: 0 turns it "
        "off (no events.log lines, debug actions refused), any other value or null leaves it on."),
    # Shuffle prefers the emitting worker's own tasks, as Storm 2's load-aware shuffle does:
    # it widens to every task when the local ones' load (queue fill, or the share of a core
    # their threads use, whichever is higher) passes the higher bound and narrows again
    # below the lower bound.
    "topology.disable.loadaware.messaging": Key(False, (bool,), None,
        "true: shuffle spreads evenly over every target task, ignoring locality and load."),
    "topology.localityaware.higher.bound": Key(0.8, (int, float), 0,
        "Shuffle widens from the worker's own tasks to every task when the local ones' load passes this "
        "(0-1)."),
    "topology.localityaware.lower.bound": Key(0.2, (int, float), 0,
        "Shuffle narrows back to the worker's own tasks when their load falls below this (0-1)."),
    # Capacity of an executor's data queue, in tuples: above it spouts pause.
    "topology.executor.receive.buffer.size": Key(32768, (int,), 1,
        "Capacity of an executor's input queue, in tuples; above it the spouts pause (backpressure)."),
    # Capacity of a worker's transfer queue (what waits for its send thread), in
    # messages: a batch of tuples or one ack each.  Above it the worker counts as
    # congested, like a full executor queue, so no spout outruns the send thread.
    "topology.transfer.buffer.size": Key(1024, (int,), 2,
        "Capacity of a worker's transfer queue (messages waiting for its send thread); above it the worker "
        "counts as congested."),
    # A spout holds back while its worker's bolts have more than this many tuples
    # queued in all (they share its GIL); 0 turns the yield off.  See spout_executor.
    "topology.spout.yield.queued.tuples": Key(1000, (int,), 0,
        "A spout holds back while its worker's bolts have more than this many tuples queued; 0: never."),
    # How many times a spout's next_tuple runs before its output is flushed.
    "topology.spout.batch.size": Key(64, (int,), 1,
        "Times a spout's next_tuple runs in one turn before its output is flushed."),
    # How long a spout sleeps when next_tuple emitted nothing (Storm's default 1 ms).
    "topology.sleep.spout.wait.strategy.time.ms": Key(1, (int, float), 0,
        "How long a spout sleeps when next_tuple emitted nothing (woken at once by acks and fails)."),
    "topology.max.error.report.per.interval": Key(5, (int,), 1,
        "Errors a task reports per throttle interval; the rest are only counted."),
    "topology.error.throttle.interval.secs": Key(10, (int, float), 0.001,
        "The interval of topology.max.error.report.per.interval."),
    # Serialize every emitted value with msgpack, not just the cheap type check.
    "topology.testing.always.try.serialize": Key(False, (bool,), None,
        "Serialize every emitted value as the wire would, not only values of unusual types (tests)."),
    "topology.auto.task.hooks": Key([], (list,), None,
        "Storm's task hooks: accepted so Storm configs load, but Squall runs no task hooks."),
    # -- resource-aware scheduling (squall.topology.resources, squall.nimbus.packing,
    # docs/scheduling.md): Storm's keys and defaults.  Declared on a component (its
    # spec's set_memory_load / set_cpu_load, or these keys in its config) or for the whole
    # topology; any declaration switches the topology to the resource-aware scheduler.
    "topology.component.resources.onheap.memory.mb": Key(128.0, (int, float), 0,
        "Memory (MB) one executor of a component is expected to use; declared anywhere, the topology is "
        "scheduled by resources (docs/scheduling.md)."),
    "topology.component.resources.offheap.memory.mb": Key(0.0, (int, float), 0,
        "Memory (MB) an executor uses outside Python's heap (buffers, a child process); added to onheap."),
    "topology.component.cpu.pcore.percent": Key(10.0, (int, float), 0,
        "CPU one executor of a component is expected to use, in percent of a core (100: a whole core)."),
    "topology.worker.max.heap.size.mb": Key(768.0, (int, float), 1,
        "The most memory (MB) the resource-aware scheduler packs into one worker, and the cap on a worker's "
        "memory limit."),
    "topology.scheduler.strategy": Key(None, (str, type(None)), None,
        "\"resource-aware\" (or Storm's DefaultResourceAwareStrategy class name): schedule by resources even "
        "with none declared; \"even\": Storm's even scheduler whatever is declared; null: resource-aware "
        "when a component declares resources."),
    # Worker restarts back off exponentially from initial to max.
    "supervisor.worker.restart.backoff.initial.secs": Key(1.0, (int, float), 0,
        "The first wait before restarting a worker (or multilang child) that died; it doubles while it "
        "keeps dying."),
    "supervisor.worker.restart.backoff.max.secs": Key(30.0, (int, float), 0,
        "The longest wait between restarts of a worker (or multilang child) that keeps dying."),
    "worker.shutdown.timeout.secs": Key(5.0, (int, float), 0,
        "How long a stopping worker waits for its executors to finish in order."),
    # The garbage collector's gen-0 threshold while workers run (see squall.worker.gc).
    "worker.gc.gen0.threshold": Key(50_000, (int,), 0,
        "The garbage collector's generation-0 threshold in workers; 0: Python's own, and no heap freeze."),
    # Worker processes (squall.worker.process.lifecycle): heartbeat.json is rewritten this often,
    "worker.heartbeat.frequency.secs": Key(1.0, (int, float), 0.01,
        "How often a worker process rewrites its heartbeat for its supervisor."),
    # assignment.json is checked for changes this often,
    "worker.assignment.poll.secs": Key(0.5, (int, float), 0.01,
        "How often a worker process checks its assignment for changes."),
    # a congested worker repeats it to its peers this often (they forget it after 3 periods).
    "worker.backpressure.resend.secs": Key(1.0, (int, float), 0.01,
        "How often a congested worker repeats so to its peers (they forget it after 3 periods)."),
    # Frames a ZeroMQ push socket queues for one peer before dropping new ones.
    "zmq.hwm": Key(1000, (int,), 1,
        "Frames a worker's ZeroMQ socket queues for one peer before dropping new ones."),
    # -- multilang (Storm's keys and defaults) ------------------------------
    "topology.multilang.serializer": Key("org.apache.storm.multilang.JsonSerializer", (str,), None,
        "The multilang children's serializer: Storm's JSON, or "
        "com.yelp.pyleus.serializer.MessagePackSerializer (pystorm's msgpack)."),
    # None: fall back to supervisor.worker.timeout.secs, as Storm does.
    "topology.subprocess.timeout.secs": Key(None, (int, float, type(None)), 0.001,
        "A multilang child silent this long (no heartbeat answer) is killed and restarted; null: "
        "supervisor.worker.timeout.secs."),
    "topology.shellbolt.max.pending": Key(100, (int,), 1,
        "Tuples a shell bolt sends its child before waiting for it to catch up."),
    "topology.multilang.resources.dir": Key(None, (str, type(None)), None,
        "The directory multilang children run in, unless their spec gives cwd=; null: resources/ beside "
        "the topology file, else its directory."),
    "topology.multilang.tap.dir": Key(None, (str, type(None)), None,
        "A directory where every multilang child's bytes are recorded, for debugging the protocol; null: "
        "none."),
    # Set by a worker process to its own directory (never by users): multilang
    # children write their pid files in <dir>/pids, as under Storm's
    # <storm.local.dir>/workers/<worker id>/pids, and the supervisor kills any
    # a dead worker left behind.
    "squall.worker.dir": Key(None, (str, type(None)), None,
        "Set by a worker process to its own directory (not by users): multilang pid files go in <dir>/pids."),
    # -- transactional topologies (squall.transactional) ----------------------
    # Their state's key; None: the topology's name.
    "topology.transactional.id": Key(None, (str, type(None)), None,
        "The key of a transactional topology's state; null: the topology's name."),
    # Where the state lives: this root in the cluster's ZooKeeper, or in another
    # ensemble when servers (and port) are set (Storm's keys and defaults).
    "transactional.zookeeper.root": Key("/transactional", (str,), None,
        "The ZooKeeper node under which transactional topologies keep their state."),
    "transactional.zookeeper.servers": Key(None, (list, type(None)), None,
        "Another ZooKeeper ensemble for transactional state; null: storm.zookeeper.servers."),
    "transactional.zookeeper.port": Key(None, (int, type(None)), 1,
        "The port of transactional.zookeeper.servers; null: storm.zookeeper.port."),
    # -- Trident streams read from a plain Spout (squall.trident.rich_spout) ---------
    # Storm's RichSpoutBatchExecutor keys and defaults: the most tuples a batch takes,
    # and the least time between two new batches (the spout cannot say it has tuples).
    "topology.spout.max.batch.size": Key(1000, (int,), 1,
        "A Trident stream read from a plain Spout: the most tuples one batch takes from it (next_tuple is "
        "called until then, or until a call emits nothing)."),
    "topology.trident.batch.emit.interval.millis": Key(500, (int, float), 0,
        "A Trident stream read from a plain Spout: the least time between the starts of two new batches "
        "(empty or not; replays are not held back)."),
    # A component's own key (spec(config=...)): its executor j runs in the worker of
    # executor j of the named component (squall.nimbus.placement.colocations).
    "topology.colocate.with": Key(None, (str, type(None)), None,
        "A component's own setting: the name of another component with as many executors; executor j of "
        "both runs in one worker, also after a reschedule. Trident sets it on a state_query's bolt, so "
        "that a state kept in a worker's memory or on its node is read where it is written."),
    # -- stateful bolts with checkpoints (squall.state; docs/state.md) ----------
    # Where bolts' checkpointed state lives: memory (lost with its worker),
    # sqlite (one machine) or redis; the .config is a JSON object (or its text,
    # as Storm's): {"path": ...} for sqlite, {"url": ...} for redis.
    "topology.state.provider": Key("sqlite", (str,), None,
        "Where stateful bolts' checkpoints live: sqlite (one machine), redis or memory (lost with the "
        "worker)."),
    "topology.state.provider.config": Key(None, (str, dict, type(None)), None,
        "The provider's settings, a map or its JSON text: {\"path\": ...} for sqlite, {\"url\": ...} for "
        "redis."),
    # How often a checkpoint starts; must stay below topology.message.timeout.secs.
    "topology.state.checkpoint.interval.ms": Key(1000, (int, float), 1,
        "How often a checkpoint starts (ms); must stay below the message timeout."),
    # SQLite state files go here (<dir>/<topology>.sqlite); None: ~/.squall/state, one
    # place per machine and user, which every worker of the topology on the machine shares.
    "squall.state.dir": Key(None, (str, type(None)), None,
        "Where SQLite state files go (<dir>/<topology>.sqlite); null: ~/.squall/state."),
    # -- security (squall.security; docs/security.md) --------------------------
    # On: nimbus speaks TLS and wants a token on every request, workers talk
    # CURVE, ZooKeeper nodes carry digest ACLs; daemons refuse to start without
    # a keyring.  Off only for a dev cluster started with --insecure.
    "squall.secure": Key(True, (bool,), None,
        "TLS and tokens for nimbus, CURVE between workers, ACLs in ZooKeeper; false only for a dev cluster "
        "started with --insecure."),
    # The cluster keyring (0600) written by `squall secrets init`; None: $SQUALL_KEYRING,
    # else ~/.squall/keyring.json.
    "squall.keyring.path": Key(None, (str, type(None)), None,
        "The keyring (squall secrets init); null: $SQUALL_KEYRING, else ~/.squall/keyring.json."),
    # Nimbus's certificate and key (PEM); None: the keyring's, signed by its CA.
    "nimbus.tls.cert.path": Key(None, (str, type(None)), None,
        "Nimbus's certificate (PEM); null: the keyring's, signed by its CA."),
    "nimbus.tls.key.path": Key(None, (str, type(None)), None,
        "Nimbus's private key (PEM); null: the keyring's."),
    # What clients trust for nimbus's certificate; None: the keyring's CA.
    "nimbus.tls.ca.path": Key(None, (str, type(None)), None,
        "What clients trust for nimbus's certificate; null: the keyring's CA."),
    # Storm's authorizer: admins may do anything; nimbus.users (None: every
    # authenticated user) may submit; read-only users may only read; a topology's
    # owner (its submitter) and its topology.users may kill, rebalance,
    # activate and deactivate it.
    "nimbus.admins": Key(["admin"], (list,), None,
        "Users who may do anything."),
    "nimbus.users": Key(None, (list, type(None)), None,
        "Users who may submit; null: every user with a token."),
    "nimbus.readonly.users": Key([], (list,), None,
        "Users who may only read."),
    "topology.users": Key([], (list,), None,
        "Users besides the submitter who may kill, rebalance, activate and deactivate the topology."),
    # Conf keys whose values are never shown (besides *.password, *.token, *.secret).
    "topology.secret.keys": Key([], (list,), None,
        "Config keys whose values are shown as ***** in answers and logs (besides *.password, *.token, "
        "*.secret, ...)."),
    # Environment variables passed to workers (Storm's topology.environment adds more).
    "topology.environment": Key({}, (dict,), None,
        "Environment variables added to the topology's worker processes."),
    "supervisor.worker.env.allow": Key(["PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ",
                                     "TMPDIR", "JAVA_HOME", "SPARK_HOME", "PYTHONPATH", "VIRTUAL_ENV",
                                     "SQUALL_CONF"], (list,), None,
        "Environment variables of the supervisor's that workers inherit."),
    # Nimbus HTTP: requests with a valid token served at once (past that one is
    # answered 503, busy), and how long a request may take to send its headers and
    # its body before it is dropped.
    "nimbus.http.max.connections": Key(32, (int,), 1,
        "Requests with a valid token served at once; the next is answered 503 at once."),
    # Of those, how many one user may have open at once (past it: 429 at once), so that one
    # user's slow requests never hold every place.
    "nimbus.http.max.connections.per.user": Key(8, (int,), 1,
        "Requests one user may have open at nimbus at once; the next is answered 429 at once."),
    "nimbus.http.timeout.secs": Key(30, (int, float), 0.01,
        "How long a request may take to send its headers and body."),
    # Connections that have not yet presented a valid token (in their TLS handshake,
    # sending a first request, or idle): each is closed after this long (at most
    # nimbus.http.timeout.secs); past this many from one address, or in all, the
    # oldest is turned away (503 once its handshake is done), so strangers holding
    # idle sockets never lock users out.
    "nimbus.http.handshake.timeout.secs": Key(5, (int, float), 0.01,
        "How long a connection without a valid token yet may stay open."),
    "nimbus.http.max.pending.per.address": Key(128, (int,), 1,
        "Connections without a valid token yet from one address; past it the oldest is turned away."),
    "nimbus.http.max.pending": Key(512, (int,), 1,
        "Connections without a valid token yet, over all addresses; past it the oldest is turned away."),
    # Caps on what one submit may ask for (Storm's nimbus.slots.perTopology,
    # nimbus.executors.perTopology; tasks is Squall's).
    "nimbus.slots.perTopology": Key(64, (int,), 1,
        "The most workers one topology may ask for."),
    "nimbus.executors.perTopology": Key(2048, (int,), 1,
        "The most executors one topology may ask for."),
    "nimbus.tasks.perTopology": Key(8192, (int,), 1,
        "The most tasks one topology may ask for."),
    # A code package's size once unzipped, and its number of files.
    "nimbus.code.max.uncompressed.bytes": Key(256 * 1024 * 1024, (int,), 1,
        "The largest a code package may be once unzipped."),
    "nimbus.code.max.entries": Key(10_000, (int,), 1,
        "The most files a code package may hold."),
    # Nimbus imports a submitted package to check that its classes load, in a sandbox
    # (squall.runtime.sandbox: bubblewrap, no network, nothing of the host's files but
    # the system's and Python's, resource limits): "auto" where bubblewrap works on this
    # host and else no import at all (squall submit checked it on the client),
    # "required": nimbus refuses to start without a working sandbox, "off": no import.
    "nimbus.verify.sandbox": Key("auto", (str,), None,
        "Importing a submitted package to check it: auto (in a sandbox where bubblewrap works, else not at "
        "all), required or off."),
    # Nimbus as root runs each verification as a uid of [first, last] of its own (no
    # passwd entry needed), so at most that many at once; not root, as its own user in a
    # user namespace (then only the count matters).
    "nimbus.verify.uids": Key([65400, 65463], (list,), None,
        "[first, last]: the uids nimbus as root runs verifications as."),
    # How long one verification may take before its whole sandbox is killed.
    "nimbus.verify.timeout.secs": Key(60, (int, float), 0.01,
        "How long one verification may take before its sandbox is killed."),
    # The largest frame a worker accepts from a peer (ZMQ_MAXMSGSIZE): a bigger
    # one is refused by ZeroMQ before it is buffered.
    "zmq.max.message.bytes": Key(64 * 1024 * 1024, (int,), 1024,
        "The largest frame a worker accepts from a peer; ZeroMQ refuses bigger ones before buffering them."),
    # The largest message a multilang child may send; past it the child is
    # faulted and restarted.
    "topology.multilang.max.message.bytes": Key(64 * 1024 * 1024, (int,), 1,
        "The largest message a multilang child may send; past it the child is faulted and restarted."),
    # Files `squall submit` packs besides what the topology imports and its shell
    # components run: glob patterns relative to the project root (`--include` adds more).
    "topology.package.include": Key(None, (list, type(None)), None,
        "Glob patterns (relative to the topology file's directory) of what squall submit packs; null: all "
        "but dotfiles, VCS dirs, virtualenvs, key files."),
    # -- cluster daemons (squall.yaml) --------------------------------------
    "storm.zookeeper.servers": Key(["127.0.0.1"], (list,), None,
        "The ZooKeeper ensemble's hosts."),
    "storm.zookeeper.port": Key(2181, (int,), 1,
        "The ZooKeeper ensemble's port."),
    "storm.zookeeper.root": Key("/squall", (str,), None,
        "The node under which Squall keeps the cluster's state."),
    "storm.zookeeper.session.timeout": Key(20000, (int,), 1,
        "The ZooKeeper session timeout (ms)."),
    "storm.zookeeper.connection.timeout": Key(15000, (int,), 1,
        "How long a daemon waits to connect to ZooKeeper (ms)."),
    "storm.local.dir": Key("squall-local", (str,), None,
        "A supervisor's own directory: its node id, topologies' code, its worker slots, sandboxed state, "
        "the node's Spark Connect files."),
    "storm.local.hostname": Key("127.0.0.1", (str,), None,
        "This node's address, never assumed to be 127.0.0.1 elsewhere: its supervisor registers it and its "
        "workers listen and are reached on it, its logviewer and DRPC server listen on it, a nimbus "
        "advertises it to clients and standbys, and `squall dev-zookeeper` listens on it unless given "
        "--host."),
    # Where clients find nimbus: "host:port" of every nimbus (any one answers).
    "nimbus.seeds": Key(["127.0.0.1:6627"], (list,), None,
        "Where clients find nimbus: host:port of every nimbus (any one answers)."),
    "nimbus.host": Key("127.0.0.1", (str,), None,
        "The address nimbus's HTTPS API and UI listen on (it advertises storm.local.hostname, which should "
        "reach it)."),
    "nimbus.http.port": Key(6627, (int,), 0,
        "The port of nimbus's HTTPS API and UI."),
    "nimbus.autoscale.freq.secs": Key(1, (int, float), 0.01,
        "Seconds between the leader's looks at which self-regulating topologies' rounds are due."),
    "nimbus.monitor.freq.secs": Key(10, (int, float), 0.01,
        "How often the leader compares assignments with heartbeats and reassigns what died."),
    # How often every nimbus (standbys too) reads the workers' statistics into its windows.
    "nimbus.stats.freq.secs": Key(5, (int, float), 0.01,
        "How often every nimbus (standbys too) reads the workers' statistics into its windows."),
    "nimbus.supervisor.timeout.secs": Key(60, (int, float), 0.01,
        "Storm's key, accepted so Storm configs load; Squall uses nimbus.task.timeout.secs for a silent "
        "supervisor."),
    "nimbus.task.timeout.secs": Key(30, (int, float), 0.01,
        "A worker (or a supervisor) silent this long loses its executors to other slots."),
    "nimbus.task.launch.secs": Key(120, (int, float), 0.01,
        "How long a newly assigned worker has to send its first heartbeat."),
    "nimbus.code.max.bytes": Key(16 * 1024 * 1024, (int,), 1,
        "The largest code package nimbus accepts, compressed."),
    "supervisor.slots.ports": Key([6700, 6701, 6702, 6703], (list,), None,
        "The supervisor's worker slots: one port per worker process."),
    # One worker is one GIL: its threads gain nothing from a second core and lose to the
    # cache and lock traffic of moving between cores.  Each worker is pinned to one core of
    # supervisor.cpu.cores (None: every core this supervisor may use), slot k to the k-th.
    "supervisor.worker.cpu.affinity": Key(True, (bool,), None,
        "Pin each worker to one core of supervisor.cpu.cores (slot k to the k-th)."),
    # Storm's key: each topology's workers run as a Unix user of their own, in a sandbox
    # (squall.runtime.sandbox), so that user code reaches nothing of the supervisor's or
    # another topology's.  None (the default): whenever the supervisor can (root, with
    # bubblewrap), saying at start why not otherwise; True: the supervisor refuses to
    # start without it; False: workers run as the supervisor's user.
    "supervisor.run.worker.as.user": Key(None, (bool, type(None)), None,
        "Workers run as the topology's own uid in a sandbox: null whenever the supervisor can, true or "
        "refuse to start, false never."),
    # [first, last]: the uids (and gids of the same number) handed to topologies on a node;
    # no passwd entries needed.  Below nimbus.verify.uids.
    "supervisor.worker.uids": Key([61184, 65399], (list,), None,
        "[first, last]: the uids (and gids) handed to topologies on a node; no passwd entries needed."),
    # Host directories every sandboxed worker of the node sees as they are (read and write,
    # as Unix permissions allow), e.g. a data mount; nothing else outside its own is shown.
    "supervisor.worker.shared.dirs": Key([], (list,), None,
        "Host directories every sandboxed worker of the node sees (a data mount, say)."),
    "supervisor.cpu.cores": Key(None, (list, type(None)), None,
        "The cores this supervisor may give its workers; null: every core it may use."),
    "supervisor.heartbeat.frequency.secs": Key(5, (int, float), 0.01,
        "How often the supervisor refreshes its node's heartbeat in ZooKeeper."),
    "supervisor.monitor.frequency.secs": Key(3, (int, float), 0.01,
        "How often the supervisor checks its workers (alive, timed out, not started) and (re)launches them."),
    # Storm's node health checks (squall.supervisor.health): a script printing a line that
    # starts with ERROR, failing or timing out keeps new workers off the node.
    "storm.health.check.dir": Key(None, (str, type(None)), None,
        "A directory of executable health-check scripts the supervisor runs every "
        "supervisor.monitor.frequency.secs; while one fails (prints ERROR..., exits non-zero or "
        "times out) the node takes no new workers. null: no checks."),
    "storm.health.check.timeout.ms": Key(5000, (int,), 1,
        "How long a health-check script may run before it counts as failed."),
    "supervisor.assignments.sync.secs": Key(10, (int, float), 0.01,
        "How often the supervisor reads its assignments (and fetches new topologies' code)."),
    "supervisor.worker.timeout.secs": Key(30, (int, float), 0.01,
        "A worker whose heartbeat is this old is killed and restarted."),
    "supervisor.worker.start.timeout.secs": Key(120, (int, float), 0.01,
        "How long a starting worker has to send its first heartbeat."),
    # Longer than worker.shutdown.timeout.secs: an orderly stop is not cut short.
    "supervisor.worker.shutdown.sleep.secs": Key(6, (int, float), 0,
        "How long the supervisor waits for a worker it stops before killing it."),
    # -- resources (docs/scheduling.md): what the node offers the resource-aware scheduler,
    # and the memory limits of the workers it places.
    "supervisor.memory.capacity.mb": Key(None, (int, float, type(None)), 0,
        "Memory (MB) this node offers workers; null: the machine's memory."),
    "supervisor.cpu.capacity": Key(None, (int, float, type(None)), 0,
        "CPU this node offers workers, in percent of a core; null: 100 per core."),
    "supervisor.worker.memory.limit.enforce": Key(True, (bool,), None,
        "Kill and restart a worker of a resource-aware topology whose memory (RSS, with its children) "
        "stays over its limit (docs/scheduling.md)."),
    "supervisor.worker.memory.limit.samples": Key(3, (int,), 1,
        "Consecutive samples (one per supervisor.monitor.frequency.secs) a worker must be over its memory "
        "limit before it is killed."),
    # -- topologies' own environments (squall.runtime.envbuild, docs/dependencies.md) ----
    "supervisor.env.cache.grace.secs": Key(600, (int, float), 0,
        "A topology's environment (<storm.local.dir>/envs/<hash>, built from its --requirements) that no "
        "topology on the node uses is removed after this many seconds; nimbus keeps its own cache by the "
        "same rule."),
    "supervisor.env.build.timeout.secs": Key(900, (int, float), 1,
        "How long building one topology environment (pip install) may take, on nimbus and on a supervisor, "
        "before it counts as failed."),
    # Building an environment runs code the submitter chose, so a cluster (nimbus and every
    # supervisor, each from its own conf: never a topology's) builds only wheels from its
    # index (pip's own config: /etc/pip.conf) unless these list more: kinds of "sdist",
    # "url", "vcs", "index" (a requirements file's own -i/--extra-index-url/--find-links
    # URL/--trusted-host) and "editable"; directories a requirement's local path (a wheel,
    # a --find-links directory, a source) must lie under.
    "squall.env.build.allow": Key([], (list,), None,
        "What builds a cluster runs besides wheels from its index: any of sdist, url, vcs, index, editable "
        "(docs/dependencies.md); the cluster's conf only."),
    "squall.env.build.paths": Key([], (list,), None,
        "Directories a requirement's local path (wheel, --find-links directory, source) must lie under; "
        "the cluster's conf only."),
    # A daemon as root runs each build (pip, in a sandbox with the network) as a uid of
    # [first, last] of its own, so at most that many at once; above nimbus.verify.uids.
    "squall.env.build.uids": Key([65464, 65495], (list,), None,
        "[first, last]: the uids a daemon as root runs environment builds (pip) as, one per build at once."),
    # The only environment variables a build gets besides its own fixed few (an index's
    # address, a proxy): never the daemon's environment.  A build that runs user code
    # (an allowed sdist) can read them.
    "squall.env.build.environment": Key({}, (dict,), None,
        "Environment variables every environment build gets (an index URL, a proxy); never the daemon's "
        "own."),
    # Nimbus builds at most this many environments at once for one user, and in all; a
    # submit past either is refused at once (429) rather than waiting on a request slot.
    # A cached environment needs no build.  The environments of one user's topologies
    # may take at most this many bytes on nimbus (0: no cap).
    "nimbus.env.builds.per.user": Key(2, (int,), 1,
        "Environment builds nimbus runs at once for one user; a submit needing one more is refused at once "
        "(429)."),
    "nimbus.env.builds.max": Key(4, (int,), 1,
        "Environment builds nimbus runs at once in all; a submit needing one more is refused at once (429)."),
    "nimbus.env.max.bytes.per.user": Key(20 * 1024 ** 3, (int,), 0,
        "Bytes the environments of one user's topologies may take on nimbus; a build past it is refused "
        "(0: no cap)."),
    # -- logs and the logviewer (squall.supervisor.logviewer) --------------------
    # Each supervisor serves its workers' logs (and its daemons', from storm.log.dir) on this
    # port, over nimbus's TLS and tokens; 0: one the OS picks (the UI and `squall logs` find
    # it in ZooKeeper); None: no logviewer.
    "logviewer.port": Key(8000, (int, type(None)), 0,
        "The port of each supervisor's logviewer, on storm.local.hostname, which serves its workers' and "
        "daemons' logs over nimbus's TLS and tokens (0: one the OS picks, found through ZooKeeper; null: "
        "none)."),
    # A worker's log (<storm.local.dir>/workers-artifacts/<topology id>/<port>/worker.log)
    # is rotated past this size: worker.log.1 is the newest of the rotated files.
    "supervisor.worker.log.max.bytes": Key(100 * 1024 * 1024, (int,), 1024,
        "A worker's log (workers-artifacts/<topology id>/<port>/worker.log) rotates past this size."),
    # Workers log readable lines (a trace as Python prints it); True: JSON lines, one per
    # event, for a log shipper.
    "supervisor.worker.log.json": Key(False, (bool,), None,
        "Workers log JSON lines, one per event, instead of readable lines."),
    # The most one worker's logs (the file and its rotated ones) and all of them may
    # take (MB), and how long a stopped worker's logs are kept (minutes): Storm's keys.
    "logviewer.max.per.worker.logs.size.mb": Key(2048, (int, float), 1,
        "The most one worker's log and its rotated files take; the oldest rotated files go first."),
    "logviewer.max.sum.worker.logs.size.mb": Key(4096, (int, float), 1,
        "The most all stopped workers' logs on a node take; the oldest go first."),
    "logviewer.cleanup.age.mins": Key(10080, (int, float), 0,
        "A stopped worker's logs are removed this long after their last line."),
    "logviewer.cleanup.interval.secs": Key(300, (int, float), 0.01,
        "How often a supervisor looks for logs to remove."),
    # How many requests one user may have open at one logviewer at once (a download holds
    # its place until its last byte); past it: 429 at once.
    "logviewer.max.requests.per.user": Key(4, (int,), 1,
        "Requests one user may have open at one logviewer at once (a download holds its place until its "
        "last byte); past it 429 at once."),
    # -- worker profiling (squall.runtime.profiling, docs/profiling.md) ------------
    # Storm's key: whether nimbus takes profile, stack dump and restart requests for workers
    # (py-spy, run by the worker's supervisor).  On by default: py-spy ships with Squall.
    "worker.profiler.enabled": Key(True, (bool,), None,
        "Whether nimbus takes requests to dump a worker's stacks, profile it or restart it (its "
        "supervisor runs py-spy); off: they are refused (503)."),
    # The longest profile one request may ask for (Storm's UI asks for 10 minutes).
    "worker.profiler.max.secs": Key(600, (int, float), 1,
        "The longest profile of a worker one request may ask for, in seconds."),
    # What py-spy writes is kept beside the worker's log; past this many files the oldest go.
    "worker.profiler.keep.files": Key(20, (int,), 1,
        "Stack dumps and profiles kept per worker (beside its log); the oldest go first."),
    # How long one stack dump may take before py-spy is killed and the request fails.
    "worker.profiler.dump.timeout.secs": Key(30, (int, float), 1,
        "How long one stack dump (py-spy dump) may take before it is stopped and the request fails."),
    # How long a token nimbus mints for reading one logviewer (squall.security.logtokens) is
    # valid.  Nimbus's clock and the supervisors' must agree far better than this (NTP).
    "logviewer.token.validity.secs": Key(300, (int, float), 1,
        "How long a token nimbus mints for one user and one logviewer is valid; the logviewers take no "
        "other token."),
    # Who may read every topology's logs besides nimbus.admins (a topology's own conf may
    # name more readers of its logs with the same key, as topology.users may read them).
    "logs.users": Key(None, (list, type(None)), None,
        "Who may read every topology's logs besides nimbus.admins (in a topology's conf: who may read its "
        "logs)."),
    # The daemons' own log files, which the logviewer serves to nimbus.admins and logs.users
    # (/api/v1/daemonlog); None: none served.
    "storm.log.dir": Key(None, (str, type(None)), None,
        "The daemons' log files the logviewer serves to nimbus.admins and logs.users."),
    # -- DRPC (squall.drpc, the server squall.drpc_server; docs/drpc.md) -----------------
    # Where DRPC servers run (host names): clients call one, every DRPCSpout fetches from
    # them (a topology may set its own).  None: no servers configured.
    "drpc.servers": Key(None, (list, type(None)), None,
        "The DRPC servers' hosts, which DRPC clients call and DRPC spouts fetch requests from."),
    # A DRPC server's HTTP(S) port, for clients (Storm's form: GET /drpc/<function>/<args>,
    # POST /drpc/<function>) and for the topologies' spouts alike (Storm's thrift ports 3772
    # and 3773 and its HTTP port 3774 in one); 0: one the OS picks.
    "drpc.port": Key(3772, (int,), 0,
        "A DRPC server's HTTP(S) port on storm.local.hostname, for clients and topologies alike (0: one "
        "the OS picks)."),
    # A request not answered within this long fails with SERVER_TIMEOUT (Storm's key).
    "drpc.request.timeout.secs": Key(600, (int, float), 0.001,
        "A DRPC request not answered within this long fails (SERVER_TIMEOUT)."),
    # Requests a server holds open at once (clients waiting for their result, spouts
    # waiting for a request); past it one is answered 503 at once.
    "drpc.max.requests": Key(1024, (int,), 1,
        "Requests a DRPC server holds open at once; past it one is answered 503."),
    # The largest arguments or result a server takes (bytes; Storm's drpc.max_buffer_size).
    "drpc.max_buffer_size": Key(1048576, (int,), 1,
        "The largest arguments or result a DRPC server takes (bytes)."),
    # Storm's drpc.authorizer.acl, inline: {function: {"client.users": [user, ...]}}; a
    # function named here may be called only by those users (and nimbus.admins), any
    # other by every authenticated user.  None: every authenticated user, every function.
    "drpc.authorizer.acl": Key(None, (dict, type(None)), None,
        "Who may call and who serves which DRPC function: {function: {client.users: [...], "
        "invocation.user: NAME}}; a function it does not name is called by every authenticated user and "
        "served by the topologies of the user who first serves it."),
    # Calls one user may have waiting at a server at once; the next is answered 429 at once
    # (squall.drpc_server.limits).  Keep it below drpc.max.requests.
    "drpc.max.pending.per.user": Key(128, (int,), 1,
        "Calls one user may have waiting at a DRPC server at once; past it a call is answered 429 at once."),
    # Calls all users together may have waiting for functions no topology serves (none
    # fetched within the last minute); the next such call is answered 429 at once.
    "drpc.max.pending.unserved": Key(256, (int,), 0,
        "Calls all users together may have waiting at a DRPC server for functions no topology serves; past "
        "it such a call is answered 429 at once."),
    # A DRPC function belongs to the user whose topology first fetched it (unless
    # drpc.authorizer.acl names its invocation.user): released this long after that user's
    # last topology serving it is gone, so a redeploy keeps it (squall.drpc_server.ownership).
    "drpc.function.release.secs": Key(600, (int, float), 0,
        "How long a DRPC function stays its owner's (the user whose topology first fetched it) once none "
        "of that user's topologies serving it is left."),
    # The most DRPC functions one user's topologies may hold at once.
    "drpc.max.functions.per.user": Key(256, (int,), 1,
        "The most DRPC functions one user's topologies may hold at once."),
    # -- Redis (squall.contrib.redis) -------------------------------------------
    # The Redis that spouts, sinks and stores use when their spec gives no url=
    # ("redis://[:password@]host:port/db"; passwords are redacted in messages).
    "redis.url": Key(None, (str, type(None)), None,
        "The Redis that spouts, sinks and stores use when their spec gives no url= "
        "(redis://[:password@]host:port/db)."),
    # -- Spark bolt (squall.spark) -------------------------------------------
    # A batch goes to Spark when it holds this many tuples,
    "spark.bolt.batch.size": Key(1000, (int,), 1,
        "A Spark bolt sends its batch to Spark when it holds this many tuples."),
    # when its oldest tuple is this old (ms), or on a tick tuple.
    "spark.bolt.batch.ms": Key(500, (int, float), 1,
        "A Spark bolt sends its batch when its oldest tuple is this old (ms), or on a tick tuple, if it "
        "did not fill up first."),
    # While a job runs, the next batch keeps filling up to this many tuples
    # (None: 4 x batch.size); then the bolt waits for the job (backpressure).
    "spark.bolt.batch.max.size": Key(None, (int, type(None)), 1,
        "While a Spark job runs, the next batch fills up to this many tuples, then the bolt waits; null: 4 "
        "x spark.bolt.batch.size."),
    # What one batch is expected to cost in Spark (ms): the submit-time check
    # warns when batch.ms + 2 x this comes near topology.message.timeout.secs.
    "spark.bolt.expected.job.ms": Key(300, (int, float), 0,
        "What one batch is expected to cost in Spark (ms); submit warns when batch.ms + 2 x this nears the "
        "message timeout."),
    # A Spark Connect server of the user's ("sc://host:port/;token=..."); wins
    # over the node's server.
    "spark.remote": Key(None, (str, type(None)), None,
        "A Spark Connect server of your own (sc://host:port/;token=...); wins over the node's."),
    # The node's server: set by the supervisor in each worker's conf.
    "spark.node.remote": Key(None, (str, type(None)), None,
        "The node's Spark Connect server, set by the supervisor in each worker's config (not by users)."),
    # Connect client retries before a call fails: a dead server fails the
    # batch in seconds instead of stalling the bolt for pyspark's 10 minutes.
    "spark.client.max.retries": Key(5, (int,), 0,
        "Spark Connect client retries before a call fails (a dead server fails the batch in seconds)."),
    # Servers Squall starts (supervisor, local mode): their master, extra
    # --conf settings, and how long they may take to answer a first query.
    "spark.master": Key("local[*]", (str,), None,
        "The master of Spark Connect servers Squall starts (supervisor, local mode)."),
    "spark.connect.server.conf": Key({}, (dict,), None,
        "Extra --conf settings for the Spark Connect servers Squall starts."),
    "spark.connect.server.start.timeout.secs": Key(180, (int, float), 1,
        "How long a Spark Connect server Squall starts may take to answer a first query."),
    # The supervisor runs the node's Spark Connect server (a JVM) only if asked;
    # port 0 picks a free port once and keeps it in storm.local.dir.
    "supervisor.spark.connect.enabled": Key(False, (bool,), None,
        "The supervisor runs the node's Spark Connect server (a JVM)."),
    "supervisor.spark.connect.port": Key(15002, (int,), 0,
        "The port of the node's Spark Connect server; 0: a free port, picked once and kept."),
}

DEFAULTS: dict[str, Any] = {key: spec.default for key, spec in KEYS.items()}


def validate(conf: Mapping[str, Any]) -> None:
    """Raise :class:`ConfigError` naming the first ill-typed known key."""
    for key, value in conf.items():
        if not isinstance(key, str):
            msg = f"config keys must be strings, got {key!r}"
            raise ConfigError(msg)
        spec = KEYS.get(key)
        if spec is None:
            continue
        types, lower = spec.types, spec.lower
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
        if isinstance(key, str) and key not in KEYS:
            close = difflib.get_close_matches(key, list(KEYS), n=1, cutoff=0.9)
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
    """docs/config.md: every key with its default, type and meaning, from KEYS."""
    import json

    by_section: dict[str, list[str]] = {}
    for key in sorted(KEYS):
        by_section.setdefault(key.split(".", 1)[0], []).append(key)
    order = [s for s in _SECTIONS if s in by_section] + sorted(set(by_section) - set(_SECTIONS))
    lines = [
        "# Configuration reference",
        "",
        f"<!-- Generated from squall/config.py by `{REGENERATE}`: edit the",
        "     meanings there (KEYS), not this page. -->",
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
            spec = KEYS[key]
            shown = json.dumps(spec.default)
            lines.append(f"| `{key}` | `{_cell(shown)}` | {_kind(spec.types, spec.lower)} | "
                         f"{_cell(spec.meaning)} |")
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
