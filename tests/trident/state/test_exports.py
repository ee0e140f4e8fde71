"""The state layer's public names: squall.trident.state's all resolve, and the ones
squall.trident re-exports are the same objects."""

from __future__ import annotations

import importlib

import squall.trident
import squall.trident.state


def test_every_state_name_resolves_and_squall_trident_gives_the_same_objects() -> None:
    assert set(squall.trident.state.__all__) == set(squall.trident.state._EXPORTS)
    for name, module in squall.trident.state._EXPORTS.items():
        assert getattr(squall.trident.state, name) is getattr(importlib.import_module(module), name)
    state_names = {name for name, module in squall.trident._EXPORTS.items()
                   if module.startswith("squall.trident.state")}
    assert state_names >= {"State", "StateFactory", "StateType", "MapState", "IBackingMap", "Snapshottable",
                           "NonTransactionalMap", "TransactionalMap", "OpaqueMap", "MemoryMapState",
                           "TransactionalValue", "OpaqueValue", "CachedMap", "SnapshottableMap",
                           "ITupleCollection", "SqliteMapState", "StoreMapState"}
    for name in state_names:
        assert getattr(squall.trident, name) is getattr(squall.trident.state, name)
