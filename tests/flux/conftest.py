# The dev cluster fixture of tests/cluster, for the Flux example on a real cluster.
from tests.cluster.conftest import make_cluster  # noqa: F401
