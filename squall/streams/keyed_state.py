"""State by key: ``update_state_by_key`` and ``state_query`` as the stateful bolt runs
them (the task's checkpointed KeyValueState given to them), a pure core.  States are
kept as JSON: what an updater returns is what JSON gives back."""

from __future__ import annotations

import json
from typing import Any

from squall.streams.processors import Op, Push, label_of


def as_json(value: Any, what: str) -> Any:
    """What a state holds: the value as JSON gives it back (tuples become lists)."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as e:
        msg = f"{what}: {value!r} cannot be stored as JSON ({e})"
        raise TypeError(msg) from e


def state_key(key: Any) -> str:
    try:
        return json.dumps(key)
    except (TypeError, ValueError) as e:
        msg = f"update_state_by_key: the key {key!r} cannot be stored as JSON ({e})"
        raise TypeError(msg) from e


class UpdateState(Op):
    """``update_state_by_key``: the key's state from ``apply(state, value)``, stored in
    the task's checkpointed state, emitted as ``(key, new state)``."""

    name = "update_state_by_key"
    key_keeping = True

    def __init__(self, updater: Any) -> None:
        super().__init__()
        self.updater = updater
        self.state: Any = None  # the task's KeyValueState, given by the stateful bolt

    def describe(self) -> str:
        return f"update_state_by_key({label_of(self.updater)})"

    def push_to(self, out: Push) -> Push:
        updater = self.updater

        def push(kv: Any) -> None:
            key, value = kv
            skey = state_key(key)
            state = self.state
            current = state.get(skey)
            if current is None:
                current = as_json(updater.init(), "update_state_by_key's initial state")
            new = as_json(updater.apply(current, value), f"update_state_by_key's state of {key!r}")
            state.put(skey, new)
            out((key, new))

        return push


class StateQuery(Op):
    """``state_query``: each value looked up in a ``StreamState``; ``(value, state)``."""

    name = "state_query"

    def __init__(self, update: UpdateState) -> None:
        super().__init__()
        self.update = update  # the operation whose state it reads (the same bolt's)

    def describe(self) -> str:
        return "state_query"

    def push_to(self, out: Push) -> Push:
        update = self.update

        def push(value: Any) -> None:
            state = update.state
            skey = state_key(value)
            if skey in state:
                out((value, state.get(skey)))

        return push
