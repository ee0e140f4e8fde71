"""What nimbus does, apart from HTTP and threads, behind one facade.

:class:`NimbusService` keeps the methods the API layer calls; the work is
done by one object per job:

* :class:`squall.nimbus.views.TopologyViews`: what nimbus shows (listings,
  Storm's UI views, the statistics windows, the Prometheus snapshot);
* :class:`squall.nimbus.submission.Submission`: taking a topology in;
* :class:`squall.nimbus.control.TopologyControl`: activate, deactivate, kill,
  rebalance, log levels, and the reconciliation (its decisions in
  :mod:`squall.nimbus.reconcile`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from squall.cluster.election import LeaderFence
from squall.cluster.state import ClusterState
from squall.metrics.book import StatsBook
from squall.nimbus.control import TopologyControl
from squall.nimbus.errors import ApiError, bad_request
from squall.nimbus.submission import Submission
from squall.nimbus.views import TopologyViews, worker_sample
from squall.security.admission import ID as NAME
from squall.ui.storm_api import TopologyView

__all__ = ["NAME", "ApiError", "NimbusService", "bad_request", "worker_sample"]


class NimbusService:
    def __init__(self, state: ClusterState, conf: dict[str, Any],
                 now: Callable[[], float] = time.time, stats: StatsBook | None = None,
                 leadership: Callable[[], LeaderFence | None] | None = None) -> None:
        self.state = state
        self.conf = conf
        self.now = now
        self.views = TopologyViews(state, now, stats)
        self.control = TopologyControl(state, conf, now, leadership)
        self.submission = Submission(state, conf, self.control.reconcile, self.control.put_topology, now)

    def start(self) -> None:
        """What is decided once, at nimbus's start, before it serves."""
        self.submission.start()

    # -- views ---------------------------------------------------------------

    @property
    def stats(self) -> StatsBook:
        return self.views.stats

    @property
    def worker_samples(self) -> dict[tuple[str, int], list[dict[str, Any] | None]]:
        return self.views.worker_samples

    def record(self, name: str) -> dict[str, Any]:
        return self.views.record(name)

    def list(self) -> list[dict[str, Any]]:
        return self.views.list()

    def info(self, name: str) -> dict[str, Any]:
        return self.views.info(name)

    def ingest_stats(self) -> None:
        self.views.ingest_stats()

    def samples(self, topology_id: str) -> dict[tuple[str, int], list[dict[str, Any] | None]]:
        return self.views.samples(topology_id)

    def component_stats(self, name: str, window: str) -> dict[str, dict[str, Any]]:
        return self.views.component_stats(name, window)

    def resolve(self, ident: str) -> dict[str, Any]:
        return self.views.resolve(ident)

    def view(self, record: dict[str, Any], details: bool = False) -> TopologyView:
        return self.views.view(record, details)

    def visualization(self, ident: str, window: str, sys: bool = False) -> dict[str, Any]:
        return self.views.visualization(ident, window, sys)

    def supervisors_started(self) -> dict[str, float]:
        return self.views.supervisors_started()

    def prometheus_snapshot(self) -> dict[str, Any]:
        return self.views.prometheus_snapshot()

    # -- submission ----------------------------------------------------------

    def submit(self, body: Any, owner: str | None = None) -> dict[str, Any]:
        return self.submission.submit(body, owner)

    # -- control -------------------------------------------------------------

    def set_status(self, name: str, status: str) -> dict[str, Any]:
        return self.control.set_status(name, status)

    def kill(self, name: str, wait: Any = None) -> dict[str, Any]:
        return self.control.kill(name, wait)

    def rebalance(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.control.rebalance(name, body)

    def storm_action(self, ident: str, action: str, wait: int = 0, body: Any = None) -> dict[str, Any]:
        return self.control.storm_action(ident, action, wait, body)

    def log_config(self, ident: str) -> dict[str, Any]:
        return self.control.log_config(ident)

    def set_log_config(self, ident: str, changes: dict[str, Any]) -> dict[str, Any]:
        return self.control.set_log_config(ident, changes)

    def reconcile_all(self) -> None:
        self.control.reconcile_all()

    def remove_orphan_assignments(self) -> None:
        self.control.remove_orphan_assignments()

    def reconcile(self, topology_id: str, reschedule: bool = False) -> None:
        self.control.reconcile(topology_id, reschedule)
