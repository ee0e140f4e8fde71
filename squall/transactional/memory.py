"""In-memory transactional spouts for tests and examples (Storm's
MemoryTransactionalSpout and OpaqueMemoryTransactionalSpout).

``data`` is a list of partitions, each a list of value lists; a batch takes
at most ``take_per_batch`` tuples from every partition; the attempt is
prepended to each tuple as the field ``tx`` (``tx_field`` to rename it).
The partitioned kind's metadata is ``{"index", "amount"}`` (replayed
exactly); the opaque kind's ``{"next"}`` (where the next batch starts).

Both stop starting transactions once enough have started to read all the
data (every new transaction advances every partition by up to
``take_per_batch``), so an idle topology does not spin on empty batches;
a restarted coordinator runs through that many once more, which finds
nothing left to emit.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from squall.errors import TopologyValidationError
from squall.topology.component import ComponentSpec, spout_spec
from squall.transactional.spouts import (
    Emit,
    OpaquePartitionedTransactionalSpout,
    PartitionedTransactionalSpout,
)


def _memory_spec(cls: Any, data: Any, fields: Any, take_per_batch: int, tx_field: str, name: str | None,
                 par: int, tasks: int | None, config: Mapping[str, Any] | None,
                 options: dict[str, Any]) -> ComponentSpec:
    where = f"{cls.__name__}.spec"
    if not isinstance(take_per_batch, int) or isinstance(take_per_batch, bool) or take_per_batch < 1:
        msg = f"{where}: take_per_batch must be an integer >= 1, got {take_per_batch!r}"
        raise TopologyValidationError(msg)
    if not isinstance(data, (list, tuple)) or not all(isinstance(p, (list, tuple)) for p in data):
        msg = f"{where}: data must be a list of partitions, each a list of value lists"
        raise TopologyValidationError(msg)
    if isinstance(fields, str):
        fields = [fields]
    fields = list(fields)
    for p, partition in enumerate(data):
        for i, values in enumerate(partition):
            if not isinstance(values, (list, tuple)) or len(values) != len(fields):
                msg = (f"{where}: partition {p} item {i} must be a list of {len(fields)} values "
                       f"for fields {fields}, got {values!r}")
                raise TopologyValidationError(msg)
    try:
        json.dumps(data)
    except (TypeError, ValueError) as e:
        msg = f"{where}: data must be JSON-able (it travels with the topology): {e}"
        raise TopologyValidationError(msg) from e
    options = {**options, "data": [[list(v) for v in p] for p in data], "take_per_batch": take_per_batch}
    return spout_spec(cls, f"transactional spout {cls.__name__}", name, par, tasks, config, options,
                      outputs=[tx_field, *fields])


class _MemoryData:
    options: dict[str, Any]

    @classmethod
    def spec(cls, name: str | None = None, par: int = 1, tasks: int | None = None,
             config: Mapping[str, Any] | None = None, *, data: Any, fields: Any, take_per_batch: int = 1,
             tx_field: str = "tx", **options: Any) -> ComponentSpec:
        """``data``: partitions of value lists; at most ``take_per_batch`` of each per batch."""
        return _memory_spec(cls, data, fields, take_per_batch, tx_field, name, par, tasks, config, options)

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.partitions: list[list[list[Any]]] = self.options["data"]
        self.take: int = self.options["take_per_batch"]
        longest = max((len(p) for p in self.partitions), default=0)
        self.batches_left = math.ceil(longest / self.take)  # coordinator side

    def num_partitions(self) -> int:
        # Called once per new transaction, on the coordinator: each advances every partition.
        self.batches_left -= 1
        return len(self.partitions)

    def is_ready(self) -> bool:
        return self.batches_left > 0

    def _emit_range(self, attempt: Any, emit: Emit, partition: int, start: int, end: int) -> None:
        for values in self.partitions[partition][start:end]:
            emit([attempt, *values])


class MemoryTransactionalSpout(_MemoryData, PartitionedTransactionalSpout):
    def emit_new_batch(self, attempt: Any, emit: Emit, partition: int, last_metadata: Any) -> Any:
        start = 0 if last_metadata is None else last_metadata["index"] + last_metadata["amount"]
        end = min(start + self.take, len(self.partitions[partition]))
        self._emit_range(attempt, emit, partition, start, end)
        return {"index": start, "amount": end - start}

    def emit_batch(self, attempt: Any, emit: Emit, partition: int, metadata: Any) -> None:
        start = metadata["index"]
        self._emit_range(attempt, emit, partition, start, start + metadata["amount"])


class OpaqueMemoryTransactionalSpout(_MemoryData, OpaquePartitionedTransactionalSpout):
    def batch_size(self, attempt: Any, partition: int) -> int:
        """How many tuples this attempt takes (a test may vary it per attempt:
        an opaque batch need not be the same on replay)."""
        return self.take

    def emit_batch(self, attempt: Any, emit: Emit, partition: int, last_metadata: Any) -> Any:
        start = 0 if last_metadata is None else last_metadata["next"]
        end = min(start + self.batch_size(attempt, partition), len(self.partitions[partition]))
        self._emit_range(attempt, emit, partition, start, end)
        return {"next": end}
