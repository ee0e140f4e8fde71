"""The UI's REST answers show each generated bolt's operations, as Trident's do; a
stateful bolt's too, through the checkpoint rewrite."""

from __future__ import annotations

import tempfile
from operator import add

import httpx
import pytest

from squall.local.cluster import LocalCluster
from squall.local.ui import LocalUiServer
from squall.streams import Count, PairValueMapper, StreamBuilder, TumblingWindows, ValueMapper
from tests.streams.streams_data import Pairs, Words

pytestmark = pytest.mark.timeout(60)


def test_the_rest_api_shows_each_generated_bolts_operations() -> None:
    builder = StreamBuilder()
    (builder.new_stream(Words, ValueMapper(0)).map_to_pair(lambda w: (w, 1))
        .window(TumblingWindows.of(Count(10))).count_by_key().print())
    builder.new_stream(Pairs, PairValueMapper(0, 1)).update_state_by_key(0, add)
    with tempfile.TemporaryDirectory() as state_dir, LocalCluster() as cluster:
        cluster.submit("ops", builder.build("Ops"), {"squall.state.dir": state_dir})
        server = LocalUiServer(cluster, "127.0.0.1", 0).start()
        try:
            with httpx.Client(base_url=server.url, timeout=30, trust_env=False,
                              headers={"Authorization": f"Bearer {server.gate.token}"}) as ui:
                page = ui.get("/api/v1/topology/ops").json()
                bolts = {b["boltId"]: b for b in page["bolts"]}
                assert bolts["bolt1"]["operations"] == ["map_tuple(<lambda>)", "map_to_pair(<lambda>)"]
                assert bolts["bolt2"]["operations"] == ["count_by_key(Count)", "print"]
                assert bolts["state1"]["operations"] == ["update_state_by_key(add)"]
                component = ui.get("/api/v1/topology/ops/component/bolt2").json()
                assert component["operations"] == ["count_by_key(Count)", "print"]
        finally:
            server.stop()
