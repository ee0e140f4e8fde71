"""What the app asks of the cluster it shows, by role: the routes call the object that
does each job (nimbus's views, control, submission -- squall.nimbus.web wires them --
or local mode's one LocalBackend, squall.local.ui, in every role).  Every call may
block (ZooKeeper, a submit's verification): the app makes them in worker threads."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from squall.ui.storm_api import TopologyView


class Views(Protocol):
    """What Storm's UI REST API reads, the web UI's only source."""

    def now(self) -> float: ...

    def resolve(self, ident: str) -> Any:
        """A topology by id or name; raises NotFound (squall.errors).  What it returns goes to :meth:`view`
        and, for the authorizer, names the topology's owner and users."""

    def view(self, resolved: Any, details: bool = False) -> TopologyView: ...

    def visualization(self, ident: str, window: str, sys: bool = False) -> dict[str, Any]: ...

    def summary(self, head: str) -> Any:
        """Storm's ``/api/v1/<head>/summary`` for head in cluster, supervisor, nimbus, topology."""


class Control(Protocol):
    """What Storm's UI REST API changes."""

    def storm_action(self, ident: str, action: str, wait: int = 0, body: Any = None) -> dict[str, Any]: ...

    def log_config(self, ident: str) -> dict[str, Any]:
        """Storm's ``GET /topology/:id/logconfig`` answer (squall.ui.logconfig)."""

    def set_log_config(self, ident: str, changes: dict[str, Any]) -> dict[str, Any]:
        """``changes`` (squall.ui.logconfig.logconfig_request's) made; the answer as a GET's."""

    def profile(self, ident: str, action: str, worker: str, timeout: str | None = None,
                fmt: str | None = None, locals_: bool = False, user: str | None = None) -> dict[str, Any]:
        """Storm's ``/topology/:id/profiling/<action>/:host-port[/:timeout]``: a profile, a stack
        dump or a restart of one worker asked of its supervisor (squall.runtime.profiling)."""
    def debug(self, ident: str, component: str | None, action: str, pct: str) -> dict[str, Any]:
        """Storm's debug action (``component`` None: the whole topology's); Storm's answer."""


class Leadership(Protocol):
    def require_leader(self) -> None:
        """Raises Unavailable when this process may not change anything."""

    def leader_url(self) -> str | None: ...


class Autoscale(Protocol):
    """Self-regulation (squall.nimbus.autoscale): a cluster's nimbus only."""

    def describe(self, ident: str) -> dict[str, Any]:
        """The switch, the settings and the action log, newest first."""

    def switch(self, ident: str, on: bool) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Backend:
    """Storm's UI REST API: the services that answer it, and the conf it shows."""

    conf: Mapping[str, Any]
    views: Views
    control: Control
    leadership: Leadership
    autoscale: Autoscale | None = None  # None: local mode, where nothing rebalances


class Topologies(Protocol):
    def list(self) -> list[dict[str, Any]]: ...

    def info(self, name: str) -> dict[str, Any]: ...

    def record(self, name: str) -> dict[str, Any]: ...


class Changes(Protocol):
    def kill(self, name: str, wait: Any = None) -> dict[str, Any]: ...

    def set_status(self, name: str, status: str) -> dict[str, Any]: ...

    def rebalance(self, name: str, body: dict[str, Any]) -> dict[str, Any]: ...


class Submitter(Protocol):
    def submit(self, body: Any, owner: str | None = None) -> dict[str, Any]: ...


class TokenMinter(Protocol):
    def mint(self, user: str | None, body: Any) -> dict[str, Any]:
        """A token for reading the logviewer ``body`` names (``{"logviewer": its base URL}``)
        as ``user`` (squall.nimbus.logtokens)."""


@dataclass(frozen=True)
class SquallApi:
    """Squall's own ``/api/v1/cluster`` and ``/api/v1/topologies`` (nimbus only): the
    services that answer them."""

    cluster_info: Callable[[], dict[str, Any]]
    topologies: Topologies
    changes: Changes
    submission: Submitter
    log_tokens: TokenMinter
