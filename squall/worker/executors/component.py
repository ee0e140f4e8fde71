"""What spout and bolt executors share: building tasks and their outputs."""

from __future__ import annotations

from typing import Any

from squall.errors import TopologyValidationError
from squall.topology.grouping import CustomGrouping
from squall.topology.loading import instantiate, resolve_class
from squall.topology.tuple import record_type
from squall.worker.executors import routing
from squall.worker.executors.context import TopologyContext
from squall.worker.executors.emit import StreamOut, TaskState
from squall.worker.executors.executor import Executor
from squall.worker.wire.codec import RemoteBatch


class ComponentExecutor(Executor):
    def make_context(self, task: int) -> TopologyContext:
        return TopologyContext(self.plan, self.component, task, self.host.address, self.host.resources)

    def make_instance(self, task: int) -> tuple[Any, TopologyContext, TaskState]:
        cdef = self.plan.components[self.component]
        instance = instantiate(cdef)
        context = self.make_context(task)
        instance.conf = self.conf
        instance.context = context
        instance.logger = instance.logger.bind(component=self.component, task=task)
        instance.call_soon = self.call_soon
        instance.stopping = self.stopping
        instance.clock = self.host.clock
        instance.report_error = lambda error, task=task: self.report(error, task)
        # The task's own metrics (Storm's registerMetric), shipped with the worker's stats.
        instance.metrics = self.host.metrics_of(self.component, task)
        # Component-type settings given to spec(...) (a shell command, a schema, ...).
        instance.options = dict(cdef.options)
        return instance, context, TaskState()

    def new_batch(self, task: int) -> Any:
        """Where this executor's tuples for ``task`` wait for the end of the turn: a
        list, or for a task of another worker a batch that packs them as they come."""
        if not self.host.is_remote(task):
            return []
        return RemoteBatch()

    def build_streams(self, task: int, context: TopologyContext) -> dict[str, StreamOut]:
        """Routers for each declared stream of this task, and its batch lists."""
        cdef = self.plan.components[self.component]
        subscribers = self.plan.subscribers.get(self.component, {})
        conf = self.conf
        load = None
        if not conf["topology.disable.loadaware.messaging"]:
            load = (self.host.load_of, conf["topology.localityaware.higher.bound"],
                    conf["topology.localityaware.lower.bound"])
        streams: dict[str, StreamOut] = {}
        for name, stream in cdef.streams.items():
            choosers = []
            for target, inp in subscribers.get(name, []):
                tasks = self.plan.component_tasks[target]
                indices = [stream.fields.index(f) for f in inp.grouping.fields]
                custom = None
                if inp.grouping.type == "custom":
                    cls = resolve_class(inp.grouping.custom)
                    custom = cls(**inp.grouping.args)
                    if not isinstance(custom, CustomGrouping):
                        msg = f"{inp.grouping.custom!r} is not a CustomGrouping"
                        raise TopologyValidationError(msg)
                    custom.prepare(context, name, list(tasks))
                choosers.append(routing.make_chooser(
                    inp.grouping, tasks, indices, self.host.local_tasks, custom, task, load))
                for t in tasks:
                    if t not in self.out:
                        self.out[t] = self.new_batch(t)
                        self.appends[t] = self.out[t].append
            streams[name] = StreamOut(name, record_type(stream.fields), stream.fields,
                                      routing.combine(choosers), stream.direct)
            self.stream_outs.append(streams[name])
        return streams
