"""The dev cluster fixture of the cluster tests, for the stateful word counts here."""

from tests.cluster.conftest import make_cluster  # noqa: F401 - a fixture, used by name
