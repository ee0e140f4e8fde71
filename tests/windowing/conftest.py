from tests.cluster.conftest import make_cluster  # noqa: F401 - the dev-cluster fixture, shared
