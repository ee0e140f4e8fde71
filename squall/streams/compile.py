"""A laid-out builder (squall.streams.layout) made into an ordinary topology: names,
specs, the streams between generated bolts, and the checks only a whole build can make.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from typing import Any

from squall import config as config_mod
from squall.errors import TopologyValidationError
from squall.streams.bolts import (
    PLAN_OPTION,
    HoldingProcessorBolt,
    ProcessorBolt,
    StatefulProcessorBolt,
    WindowedProcessorBolt,
)
from squall.streams.chain import BoltPlan, EntryPlan, Exit
from squall.streams.layout import Group, data_parents, lay_out
from squall.streams.stream import upstream
from squall.topology.component import (
    DEFAULT_STREAM,
    OPERATIONS_OPTION,
    PUNCTUATION_STREAM,
    ComponentSpec,
    Stream,
    StreamRef,
)
from squall.topology.grouping import Grouping
from squall.topology.loading import by_value
from squall.topology.topology import Topology

TIMEOUT_KEY = "topology.message.timeout.secs"
_GROUPINGS = {"shuffle": Grouping.SHUFFLE, "global": Grouping.GLOBAL}


def _fail(message: str) -> None:
    raise TopologyValidationError(message)


class _Build:
    def __init__(self, builder: Any, name: str | None, config: Mapping[str, Any] | None) -> None:
        self.builder = builder
        self.nodes = list(builder._nodes)
        self.name = name
        self.config = dict(config or {})
        self.where = f"StreamBuilder.build({name!r})"

    def run(self) -> type[Topology]:
        if not self.nodes:
            _fail(f"{self.where}: no stream; start one with new_stream(spout, ...)")
        if self.builder._stateful and not self.name:
            _fail(f"{self.where}: update_state_by_key keeps state under the topology's name; "
                  f"give build(name=...)")
        self.ts_field = self._timestamp_field()
        self._late_values()
        self.layout = lay_out(self.nodes)
        self._name_components()
        self._check()
        specs: dict[str, ComponentSpec] = {}
        for node in self.spouts:
            specs[self.spout_names[node.id]] = self._spout_spec(node)
        for group in self.layout.groups:
            specs[group.name] = self._group_spec(group)
        for sink, source in self.layout.sinks:
            specs[self.sink_names[sink.id]] = self._sink_spec(sink, source)
        topology = Topology.from_specs(self.name or "StreamTopology", specs, self.config)
        topology.built_by_streams = True  # type: ignore[attr-defined]  # squall local/submit run it by name
        return topology

    # -- names ----------------------------------------------------------------------------

    def _name_components(self) -> None:
        self.spouts = [n for n in self.nodes if n.kind == "spout"]
        self.spout_by_id = {n.id: n for n in self.spouts}
        self.spout_names: dict[int, str] = {}
        k = 0
        for node in self.spouts:
            given = node.extra["spec"].name
            if given is None:
                k += 1
            self.spout_names[node.id] = given or f"spout{k}"
        layout = self.layout
        states = {n.id: i for i, n in enumerate(self.builder._stateful, 1)}
        self.sink_names: dict[int, str] = {}
        count = 0
        for item in self._topological():
            if isinstance(item, Group):
                state = next((states[n.id] for n in item.nodes if n.id in states), None)
                if state is not None:
                    item.name = f"state{state}"
                    continue
                count += 1
                item.name = f"bolt{count}"
            else:
                given = item.extra["sink"][0].name
                if given is None:
                    count += 1
                self.sink_names[item.id] = given or f"bolt{count}"
        seen: dict[str, str] = {}
        for name in [*self.spout_names.values(), *(g.name for g in layout.groups), *self.sink_names.values()]:
            if name in seen:
                _fail(f"{self.where}: the component name {name!r} is given twice")
            seen[name] = name

    def _topological(self) -> list[Any]:
        """Bolts and sinks, each after those it reads; of two ready, the earlier call's first."""
        layout = self.layout
        items: dict[int, Any] = {}
        deps: dict[int, set[int]] = {}
        for group in layout.groups:
            items[id(group)] = group
            deps[id(group)] = {id(g) for g in (self._source_group(e.source) for e in group.entries)
                               if g is not None and g is not group}
        for sink, source in layout.sinks:
            items[id(sink)] = sink
            src = self._source_group(source)
            deps[id(sink)] = {id(src)} if src is not None else set()

        def made_by(key: int) -> int:
            item = items[key]
            return item.made_by if isinstance(item, Group) else item.id

        ready = [(made_by(k), k) for k, d in deps.items() if not d]
        heapq.heapify(ready)
        out: list[Any] = []
        done: set[int] = set()
        while ready:
            _, key = heapq.heappop(ready)
            out.append(items[key])
            done.add(key)
            for other, d in deps.items():
                if other not in done and key in d and d <= done and all(r[1] != other for r in ready):
                    heapq.heappush(ready, (made_by(other), other))
        return out

    def _source_group(self, source: Any) -> Group | None:
        if source.kind == "late":
            return self._late_window(source)
        return self.layout.group_of.get(source.id)

    def _late_window(self, late: Any) -> Group:
        name = late.extra["late_stream"]
        for group in self.layout.groups:
            if group.kind == "windowed" and group.window.late_stream == name:
                return group
        _fail(f"{self.where}: late_tuples({name!r}): no window declares with_late_tuple_stream({name!r})")
        raise AssertionError  # unreachable

    # -- checks of the whole build -----------------------------------------------------------

    def _timestamp_field(self) -> str | None:
        fields = {n.extra["window_value"].timestamp_field for n in self.nodes if n.kind == "window"}
        fields.discard(None)
        if len(fields) > 1:
            _fail(f"{self.where}: windows use two timestamp fields ({sorted(fields)}); streams "
                  f"between generated bolts carry one")
        return fields.pop() if fields else None

    def _late_values(self) -> None:
        """A ``late_tuples`` stream's values are what its window's input carries (a mapped
        pair, say), not a spout's Tuples: its nodes, and those after it that kept its shape,
        take that input's shape.  Only a window on an unmapped spout gives Tuples."""
        windows = {n.extra["window_value"].late_stream: n for n in self.nodes if n.kind == "window"}
        late_of: dict[int, Any] = {}
        for node in self.nodes:
            if node.kind == "late":
                window = windows.get(node.extra["late_stream"])
                if window is not None:
                    late_of[node.id] = upstream(window.parents[0])[0]
            elif node.shape == "raw" and node.parents and node.parents[0].id in late_of:
                late_of[node.id] = late_of[node.parents[0].id]  # a filter, peek or pass kept it
            else:
                continue
            source = late_of.get(node.id)
            if source is not None and source.kind != "spout":
                node.shape, node.pair = source.shape, source.pair

    def _check(self) -> None:
        timeout = config_mod.merge(config_mod.DEFAULTS, self.config).get(TIMEOUT_KEY)
        for group in self.layout.groups:
            if group.kind == "windowed":
                self._check_window(group, timeout)
            for node in group.nodes:
                if node.id in self.layout.exits and node.shape == "raw":
                    self._raw_leaves(node)
        for _sink, source in self.layout.sinks:
            if source.kind != "spout" and source.shape == "raw":
                self._raw_leaves(source)

    def _raw_leaves(self, node: Any) -> None:
        _fail(f"{self.where}: the values of {self._describe(node)} are a spout's Tuples, which cannot "
              f"leave their first bolt; map them first (a value mapper in new_stream, or map())")

    def _describe(self, node: Any) -> str:
        op = self.layout.ops.get(node.id)
        return op.describe() if op is not None else node.kind

    def _check_window(self, group: Group, timeout: Any) -> None:
        window = group.window
        reach = set()
        for entry in group.entries:
            reach |= entry.source.spouts
        for sid in sorted(reach):
            spout = self.spout_by_id[sid]
            cls = spout.extra["spec"].cls
            if getattr(cls, "_checkpointed", False):
                _fail(f"{self.where}: the stream of CheckpointedSpout {cls.__name__} reaches a window "
                      f"({window.describe()}); a window's buffer is outside the checkpoint, so a rollback "
                      f"would lose or double it")
            if window.timestamp_field and window.timestamp_field not in spout.extra["fields"]:
                _fail(f"{self.where}: the window {window.describe()} reads timestamp field "
                      f"{window.timestamp_field!r}, which spout {cls.__name__} does not declare "
                      f"(it declares {list(spout.extra['fields'])})")
        length, interval = window.length, window.interval
        if hasattr(length, "ms"):
            span = length.ms + (interval.ms if hasattr(interval, "ms") else 0)
            later_batch = any(g is not group and group in g.markers_in and g.hold for g in self.layout.groups)
            if group.par > 1 and later_batch and hasattr(interval, "ms"):
                span += interval.ms
            if timeout is not None and span >= timeout * 1000:
                _fail(f"{self.where}: the window {window.describe()} holds its values {span} ms (length "
                      f"plus slide, plus one slide more when a later bolt's batch operation waits for "
                      f"several window tasks), not below {TIMEOUT_KEY} ({timeout} s): they would time out "
                      f"and replay; raise the timeout in build(config=...) or shorten the window")

    # -- specs ----------------------------------------------------------------------------------

    def _spout_spec(self, node: Any) -> ComponentSpec:
        spec = node.extra["spec"]
        tasks = spec.tasks if spec.tasks != spec.par else node.par
        return ComponentSpec(spec.cls, "spout", name=self.spout_names[node.id], par=node.par, tasks=tasks,
                             config=spec.config, outputs=spec.raw_outputs, options=spec.options)

    def _input(self, source: Any) -> tuple[str, str, str, bool]:
        """Where a source's values come from: (component, stream, shape, late)."""
        if source.kind == "spout":
            return self.spout_names[source.id], DEFAULT_STREAM, "raw", False
        if source.kind == "late":
            window = self._late_window(source)
            shape = window.entries[0].source.shape if window.entries[0].source.kind != "spout" else "raw"
            return window.name, source.extra["late_stream"], shape, True
        return self.layout.group_of[source.id].name, f"s{source.id}", source.shape, False

    def _carries_ts(self, node: Any) -> bool:
        if self.ts_field is None:
            return False
        return node.windowed or any(self.ts_field in self.spout_by_id[s].extra["fields"] for s in node.spouts)

    def _ts_index(self, source: Any) -> int | None:
        if self.ts_field is None:
            return None
        if source.kind == "spout":
            fields = source.extra["fields"]
            return fields.index(self.ts_field) if self.ts_field in fields else None
        if source.kind != "late" and self._carries_ts(source):
            return 2 if source.pair else 1
        return None

    def _group_spec(self, group: Group) -> ComponentSpec:
        layout = self.layout
        members = {n.id for n in group.nodes}
        children: dict[int, list[list[tuple[int, int]]]] = {}
        for node in group.nodes:
            for i, parent in enumerate(data_parents(node)):
                if parent.id in members and not any(e.node is node and e.port == i for e in group.entries):
                    port = node.extra.get("branch", 0)  # a branch feeds each of its outputs apart
                    outs = children.setdefault(parent.id, [])
                    while len(outs) <= port:
                        outs.append([])
                    outs[port].append((node.id, i))
        exits = {n.id: Exit(f"s{n.id}", n.pair, self._carries_ts(n))
                 for n in group.nodes if n.id in layout.exits}
        entries: dict[tuple[str, str], list[EntryPlan]] = {}
        inputs: dict[Any, Any] = {}
        ts_index: dict[tuple[str, str], int | None] = {}
        for entry in group.entries:
            comp, stream, shape, late = self._input(entry.source)
            entries.setdefault((comp, stream), []).append(EntryPlan(entry.node.id, entry.port, shape, late))
            if (comp, stream) not in ts_index:
                ts_index[(comp, stream)] = self._ts_index(entry.source)
                if entry.by == "value":
                    grouping = Grouping.fields("value")
                elif group.grouping == "fields":
                    grouping = Grouping.fields("key")
                else:
                    grouping = _GROUPINGS[group.grouping]
                inputs[StreamRef(comp, stream)] = grouping
        for src in group.markers_in:
            inputs[StreamRef(src.name, PUNCTUATION_STREAM)] = Grouping.all()
        plan = BoltPlan(ops={n.id: layout.ops[n.id] for n in group.nodes}, order=sorted(members),
                        children=children, exits=exits, entries=entries,
                        ts_index={k: v for k, v in ts_index.items() if v is not None},
                        markers_in=[g.name for g in group.markers_in], markers_out=group.markers_out,
                        hold=group.hold,
                        operations=[layout.ops[i].describe() for i in sorted(members)])
        outputs = [Stream(["key", "value"] if e.pair else ["value"], name=e.stream) for e in exits.values()]
        for e, out in zip(exits.values(), outputs, strict=True):
            if e.ts:
                out.fields = (*out.fields, self.ts_field)
        if group.markers_out:
            outputs.append(Stream(["seq"], name=PUNCTUATION_STREAM))
        options = {PLAN_OPTION: {"plan": by_value(plan), "kind": group.kind},
                   OPERATIONS_OPTION: plan.operations}
        if group.kind == "windowed":
            return WindowedProcessorBolt.spec(name=group.name, inputs=inputs, par=group.par, outputs=outputs,
                                              **group.window.spec_kwargs(), **options)
        cls = {"stateful": StatefulProcessorBolt}.get(group.kind) or (
            HoldingProcessorBolt if group.markers_in else ProcessorBolt)
        return ComponentSpec(cls, "bolt", name=group.name, inputs=inputs, par=group.par, outputs=outputs,
                             options=options)

    def _sink_spec(self, sink: Any, source: Any) -> ComponentSpec:
        spec, par = sink.extra["sink"]
        comp, stream, _shape, _late = self._input(source)
        tasks = spec.tasks if spec.tasks != spec.par else par
        return ComponentSpec(spec.cls, "bolt", name=self.sink_names[sink.id],
                             inputs={StreamRef(comp, stream): Grouping.SHUFFLE}, par=par, tasks=tasks,
                             config=spec.config, outputs=spec.raw_outputs, options=spec.options)


def build_topology(builder: Any, name: str | None, config: Mapping[str, Any] | None) -> type[Topology]:
    return _Build(builder, name, config).run()
