"""SparkBolt: tuples in one at a time, Spark over micro-batches, Storm's guarantees.

    class Enrich(SparkBolt):
        schema = "user string, amount double"
        outputs = ["region", "total"]

        def setup_session(self, spark):
            self.users = spark.read.parquet("users.parquet").cache()

        def process_batch(self, df):
            return df.join(self.users, "user").groupBy("region").agg(F.sum("amount").alias("total"))

Threads.  The executor thread only gathers tuples, and emits and acks when
a job is over; the Spark work (building the Arrow table, the Connect calls,
fetching the result) runs in one job thread per bolt task, which hands the
result back with ``call_soon``.  So a job that takes 300 ms, or 5 s while the
server restarts, never stops the executor from taking in the next batch or
from acking the previous one, and a stop request is seen at once.  One job
runs at a time; the next batch fills meanwhile (see :mod:`.batching`).

Anchoring.  Every batch gets a column ``__squall_row`` (the row's index in
the batch).  A result that keeps it is anchored row by row to the input it
came from; a result with ``__squall_rows`` (an array of indices, e.g.
``F.collect_list("__squall_row")`` in an aggregation) is anchored to those
inputs; any other result is anchored to the whole batch.  The inputs are
acked after the result was emitted, only when the job succeeded; when it
failed (the user's code raised, the server died) every input of the batch
is failed, so reliable spouts replay them, and the bolt goes on.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from squall.errors import FailedException, SerializationError, TopologyValidationError
from squall.spark.batching import Action, Batcher
from squall.spark.schema import ROW_COLUMN, ROWS_COLUMN, BatchSchema, schema_json, wire_columns
from squall.spark.session import SessionHolder, SessionUnavailable
from squall.topology.component import DEFAULT_STREAM, Bolt, ComponentSpec
from squall.topology.tuple import Tuple

log = structlog.get_logger("squall.spark.SparkBolt")

BATCH_STREAM = "__batch"
WARN_EVERY_SECS = 30.0
OWNER_CHECK_SECS = 1.0


class Job:
    """One batch on its way through Spark."""

    __slots__ = (
        "done_at",
        "error",
        "finished",
        "first_at",
        "handled",
        "number",
        "outputs",
        "sent_at",
        "tuples",
    )

    def __init__(self, number: int, tuples: list[Tuple], first_at: float, sent_at: float) -> None:
        self.number = number
        self.tuples = tuples
        self.first_at = first_at
        self.sent_at = sent_at
        self.done_at = 0.0
        # [(stream, rows of values, anchors)]: anchors is None (whole batch),
        # a list of row indices, or a list of lists of them.
        self.outputs: list[tuple[str, list[tuple[Any, ...]], list[Any] | None]] = []
        self.error: BaseException | None = None
        self.finished = threading.Event()  # set by the job thread
        self.handled = False  # completed by the executor thread


class JobRunner:
    """The bolt task's job thread: runs one batch at a time, and times batch ages."""

    def __init__(self, bolt: SparkBolt, name: str) -> None:
        self.bolt = bolt
        # The executor thread: when it is gone (the worker died, no cleanup
        # call comes), this thread closes the session and ends too.
        self.owner = threading.current_thread()
        self._cond = threading.Condition()
        self._job: Job | None = None
        self._deadline: float | None = None
        self._stopping = False
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def submit(self, job: Job) -> None:
        with self._cond:
            self._job = job
            self._cond.notify()

    def set_deadline(self, deadline: float | None) -> None:
        with self._cond:
            if deadline != self._deadline:
                self._deadline = deadline
                self._cond.notify()

    def stop(self, timeout: float) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self.bolt.sessions.interrupt()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(timeout)

    def _main(self) -> None:
        structlog.contextvars.bind_contextvars(component=self.bolt.context.component_id,
                                               task=self.bolt.context.task_id)
        now = self.bolt.now
        try:
            while True:
                fire = False
                with self._cond:
                    while not self._stopping and self._job is None:
                        if not self.owner.is_alive():
                            return
                        wait = OWNER_CHECK_SECS
                        if self._deadline is not None:
                            wait = self._deadline - now()
                            if wait <= 0:
                                self._deadline = None
                                fire = True
                                break
                        self._cond.wait(min(wait, OWNER_CHECK_SECS))
                    if self._stopping:
                        return
                    job, self._job = self._job, None
                if fire:
                    self.bolt.call_soon(self.bolt._on_age)
                if job is not None:
                    self.bolt._run_job(job)
                    job.done_at = now()
                    job.finished.set()
                    self.bolt.call_soon(lambda job=job: self.bolt._complete(job))
        except BaseException as e:
            # A bug here, not in a job: without this thread the bolt is stuck,
            # so take the worker down (in its executor thread) to be restarted.
            log.exception("the Spark bolt's job thread died")
            self.bolt.call_soon(lambda err=e: _reraise(err))
        finally:
            self.bolt.sessions.close()


def _reraise(e: BaseException) -> None:
    raise e


class SparkBolt(Bolt):
    """Subclass it and write :meth:`process_batch`; declare the input ``schema``.

    ``schema`` (class attribute, or ``spec(schema=...)``): the input fields the
    batch DataFrame has, as a DDL string, ``{name: type}``, ``StructType`` or
    ``pyarrow.Schema``.  Each named field must be a field of every input
    stream; other input fields are not sent to Spark.

    Override ``initialize`` only with a ``super().initialize(conf, context)``.
    """

    auto_ack = False
    auto_anchor = False
    auto_fail = False
    schema: Any = None

    @classmethod
    def spec(
        cls,
        name: str | None = None,
        inputs: Any = None,
        par: int = 1,
        tasks: int | None = None,
        config: Mapping[str, Any] | None = None,
        schema: Any = None,
        **options: Any,
    ) -> ComponentSpec:
        schema = cls.schema if schema is None else schema
        if schema is None:
            msg = (f"Spark bolt {cls.__name__} needs an input schema: a 'schema' class attribute "
                   f"or spec(schema=...)")
            raise TopologyValidationError(msg)
        # JSON, so that the schema travels with the topology to nimbus and the workers.
        options["schema"] = schema_json(schema)
        options["spark_bolt"] = True
        return super().spec(name=name, inputs=inputs, par=par, tasks=tasks, config=config, **options)

    # -- what users write ----------------------------------------------------

    def setup_session(self, spark: Any) -> None:
        """Called on every new Spark session (the first, and after a reconnect):
        load static tables, cache them, create temp views.  Runs in the job thread."""

    def process_batch(self, df: Any) -> Any:
        """The batch as a DataFrame (schema fields + ``__squall_row``) -> a result
        DataFrame whose columns include the declared output fields, a dict
        ``{stream: DataFrame}``, or None (nothing to emit).  Runs in the job thread;
        raise to fail the whole batch."""
        raise NotImplementedError

    @property
    def spark(self) -> Any:
        """The current Spark Connect session (job thread only)."""
        return self.sessions.session

    # -- lifecycle -----------------------------------------------------------

    now: Callable[[], float] = staticmethod(time.monotonic)

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.conf = conf
        self.context = context
        self.batch_schema = BatchSchema(self.options.get("schema") or type(self).schema)
        size = conf["spark.bolt.batch.size"]
        max_size = conf["spark.bolt.batch.max.size"] or 4 * size
        self.batcher = Batcher(size, conf["spark.bolt.batch.ms"] / 1000.0, max_size)
        self.timeout = float(conf["topology.message.timeout.secs"])
        # A batch waits at most this long for a session before it is failed.
        self.hold_secs = max(1.0, 0.5 * self.timeout)
        name = f"spark-{context.component_id}-{context.task_id}"
        self.sessions = SessionHolder(self._remote_url, self.setup_session,
                                      max_retries=conf["spark.client.max.retries"], now=self.now, name=name)
        self.metrics = SparkBoltMetrics()
        self._checked_sources: set[tuple[str, str]] = set()
        self._running: Job | None = None
        self._numbers = 0
        self._last_warning = -WARN_EVERY_SECS
        self.runner = JobRunner(self, name)
        self.runner.start()

    def cleanup(self) -> None:
        runner = getattr(self, "runner", None)
        if runner is not None:
            runner.stop(timeout=5.0)

    def _remote_url(self) -> str:
        conf = self.conf
        url = conf.get("spark.remote") or conf.get("spark.node.remote")
        if url:
            return url
        from squall.spark.local import ProcessServer

        if not str(self.context.worker).startswith("inproc://"):
            log.warning("no spark.remote and no node server (supervisor.spark.connect.enabled): this worker "
                        "process starts a Spark Connect server (a JVM) of its own",
                        component=self.context.component_id)
        return ProcessServer.url(conf)

    # -- executor thread -----------------------------------------------------

    def process(self, tup: Tuple) -> None:
        source = (tup.component, tup.stream)
        if source not in self._checked_sources:
            try:
                self._check_source(tup)
            except TopologyValidationError:
                self.fail(tup)
                raise
        self._act(self.batcher.add(tup, self.now()))

    def process_tick(self, tup: Any) -> None:
        self._act(self.batcher.tick(self.now()))

    def _on_age(self) -> None:
        self._act(self.batcher.decide(self.now()))

    def _act(self, action: Action) -> None:
        if action is Action.BLOCK:
            job = self._running
            if job is not None:
                self.metrics.blocked += 1
                # Bounded: a hung job must not hang the executor for ever.
                if job.finished.wait(self.timeout):
                    self._complete(job)  # sends the next batch if it is due
            return
        if action is Action.SEND:
            self._send()
        elif self.batcher.pending and len(self.batcher.pending) == 1:
            self.runner.set_deadline(self.batcher.deadline())

    def _send(self) -> None:
        tuples, first_at = self.batcher.take()
        self._numbers += 1
        job = Job(self._numbers, tuples, first_at, self.now())
        self._running = job
        self.runner.set_deadline(None)
        self.runner.submit(job)

    def _complete(self, job: Job) -> None:
        if job.handled:
            return
        job.handled = True
        self._running = None
        self.batcher.done()
        m = self.metrics
        m.record(job)
        if job.error is None:
            try:
                self._emit_outputs(job)
            except SerializationError:
                for tup in job.tuples:
                    self.fail(tup)
                raise  # fatal for the worker, as for any bolt
            except Exception as e:  # noqa: BLE001 - e.g. a bad row index: fail the batch
                job.error = e
        if job.error is None:
            for tup in job.tuples:
                self.ack(tup)
            m.acked += len(job.tuples)
        else:
            for tup in job.tuples:
                self.fail(tup)
            m.failed_batches += 1
            m.failed += len(job.tuples)
            if not isinstance(job.error, FailedException):
                self.report_error(job.error)
        self._check_budget(job)
        action = self.batcher.decide(self.now())
        if action is not Action.NONE:
            self._send()
        elif self.batcher.pending:
            self.runner.set_deadline(self.batcher.deadline())

    def _emit_outputs(self, job: Job) -> None:
        tuples = job.tuples
        batch_anchor: Tuple | None = None
        emit = self.emit
        for stream, rows, anchors in job.outputs:
            if anchors is None:
                if batch_anchor is None:
                    batch_anchor = self._batch_anchor(tuples)
                for values in rows:
                    emit(list(values), anchors=batch_anchor, stream=stream)
            else:
                for values, idx in zip(rows, anchors, strict=True):
                    anchor = tuples[idx] if type(idx) is int else [tuples[i] for i in idx]
                    emit(list(values), anchors=anchor, stream=stream)
        if batch_anchor is not None and batch_anchor.anchors:
            # Its ackval is the XOR of every edge id emitted from it: acking it
            # once per root tells the acker about all of them.
            self.ack(batch_anchor)

    def _batch_anchor(self, tuples: list[Tuple]) -> Tuple:
        """One anchor standing for the whole batch: every root of every input.

        Anchoring an output to N inputs directly costs N random edge ids per
        output row; anchoring it to this tuple costs one, with the same result
        at the acker: each root of the batch gets the edge id once from this
        anchor's ack and once from the output's own.
        """
        roots: dict[int, int] = {}
        for tup in tuples:
            if tup.anchors:
                roots.update(dict.fromkeys(tup.anchors, 0))
        ctx = self.context
        return Tuple(None, ctx.component_id, BATCH_STREAM, ctx.task_id, (), roots or None)

    def _check_source(self, tup: Tuple) -> None:
        missing = [n for n in self.batch_schema.names if n not in getattr(tup.values, "_fields", ())]
        if missing:
            msg = (f"Spark bolt {self.context.component_id}: stream {tup.stream!r} of {tup.component!r} "
                   f"lacks the schema fields {missing}")
            raise TopologyValidationError(msg)
        self._checked_sources.add((tup.component, tup.stream))

    def _check_budget(self, job: Job) -> None:
        """Say when batches come near the message timeout: replays should never be silent."""
        age = self.now() - job.first_at
        if age > 0.5 * self.timeout and self.now() - self._last_warning > WARN_EVERY_SECS:
            self._last_warning = self.now()
            log.warning("a Spark batch took more than half the message timeout: tuples may time out "
                        "and replay",
                        component=self.context.component_id, batch_secs=round(age, 2),
                        spark_secs=round(job.done_at - job.sent_at, 2), timeout_secs=self.timeout,
                        tuples=len(job.tuples))

    # -- job thread ----------------------------------------------------------

    def _run_job(self, job: Job) -> None:
        try:
            spark = self.sessions.get(deadline=job.first_at + self.hold_secs)
            table = self.batch_schema.table([t.values for t in job.tuples])
            df = spark.createDataFrame(table, schema=self.batch_schema.with_row)
            result = self.process_batch(df)
            job.outputs = self._collect(result, len(job.tuples))
        except Exception as e:  # noqa: BLE001 - user code or Spark: the batch fails, the bolt goes on
            job.error = e
            if not isinstance(e, (SessionUnavailable, FailedException)):
                self.sessions.check()

    def _collect(self, result: Any, n: int) -> list[tuple[str, list[tuple[Any, ...]], list[Any] | None]]:
        if result is None:
            return []
        items = result.items() if isinstance(result, Mapping) else [(DEFAULT_STREAM, result)]
        outputs = []
        for stream, df in items:
            fields = self.context.streams.get(stream)
            if fields is None:
                msg = f"process_batch returned a result for undeclared stream {stream!r}"
                raise ValueError(msg)
            table = df.toArrow()
            names = table.column_names
            missing = [f for f in fields if f not in names]
            if missing:
                msg = f"the result for stream {stream!r} lacks the output fields {missing} (columns: {names})"
                raise ValueError(msg)
            columns = wire_columns(table, fields)
            rows = list(zip(*columns, strict=True)) if fields else [()] * table.num_rows
            anchors: list[Any] | None = None
            if ROW_COLUMN in names:
                anchors = table.column(ROW_COLUMN).to_pylist()
                if any(i is None or not 0 <= i < n for i in anchors):
                    msg = f"{ROW_COLUMN} values must be row indices of the batch (0..{n - 1})"
                    raise ValueError(msg)
            elif ROWS_COLUMN in names:
                anchors = [list(ids or ()) for ids in table.column(ROWS_COLUMN).to_pylist()]
                if any(i is None or not 0 <= i < n for ids in anchors for i in ids):
                    msg = f"{ROWS_COLUMN} values must be row indices of the batch (0..{n - 1})"
                    raise ValueError(msg)
            outputs.append((stream, rows, anchors))
        return outputs


class SparkBoltMetrics:
    """Counters and recent job timings of one Spark bolt task."""

    def __init__(self, keep: int = 2048) -> None:
        self.batches = 0
        self.failed_batches = 0
        self.acked = 0
        self.failed = 0
        self.blocked = 0
        # (tuples, seconds in Spark, seconds from first tuple to result)
        self.jobs: deque[tuple[int, float, float]] = deque(maxlen=keep)

    def record(self, job: Job) -> None:
        self.batches += 1
        self.jobs.append((len(job.tuples), job.done_at - job.sent_at, job.done_at - job.first_at))
