"""What a component learns about its place in the topology (Storm's TopologyContext)."""

from __future__ import annotations

from typing import Any


class TopologyContext:
    def __init__(self, plan: Any, component: str, task_id: int, worker: str,
                 resources: dict[str, Any] | None = None) -> None:
        self.plan = plan
        # Objects the worker shares between its tasks (Storm's worker resources):
        # a transactional state backend, one ZooKeeper client per worker process.
        self.resources: dict[str, Any] = resources if resources is not None else {}
        self.topology_name: str = plan.name
        self.definition_name: str = plan.definition_name  # what checkpointed state is keyed by
        self.component_id = component
        self.task_id = task_id
        self.component_tasks: dict[str, list[int]] = plan.component_tasks
        self.task_to_component: dict[int, str] = plan.task_component
        self.this_component_tasks = plan.component_tasks[component]
        self.this_task_index = self.this_component_tasks.index(task_id)
        self.worker = worker
        cdef = plan.components[component]
        self.sources = {(i.component, i.stream): i.grouping for i in cdef.inputs}
        self.streams = {name: s.fields for name, s in cdef.streams.items()}

    def to_dict(self) -> dict[str, Any]:
        """Storm's multilang context shape."""
        return {
            "taskid": self.task_id,
            "componentid": self.component_id,
            "task->component": {str(k): v for k, v in self.task_to_component.items()},
        }

    def __repr__(self) -> str:
        return f"TopologyContext({self.topology_name}/{self.component_id}[{self.task_id}])"
