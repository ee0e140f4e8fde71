"""Local mode: whole topologies in one process."""

from squall.local.cluster import LocalCluster
from squall.local.runner import LocalTopology

__all__ = ["LocalCluster", "LocalTopology"]
