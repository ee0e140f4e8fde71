"""The dev cluster fixture of the cluster tests, for the Streams API's cluster tests here."""

from tests.cluster.conftest import make_cluster  # noqa: F401 - a fixture, used by name
