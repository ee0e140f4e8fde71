"""The Spark Connect server process: token, loopback, adoption."""

from __future__ import annotations

import os
import stat
from typing import Any

import psutil
import pytest

from squall.spark.server import ConnectServer, remote_url

pytestmark = pytest.mark.filterwarnings("ignore:.*RETRIES_EXCEEDED:UserWarning")


def test_the_server_listens_on_loopback_only_and_wants_its_token(spark_server: Any) -> None:
    from pyspark.sql import SparkSession

    # Every port the JVM listens on is bound to 127.0.0.1
    ports = [c for c in psutil.Process(spark_server.pid).net_connections(kind="tcp") if c.status == "LISTEN"]
    assert ports and {c.laddr.ip.removeprefix("::ffff:") for c in ports} == {"127.0.0.1"}
    assert spark_server.port in {c.laddr.port for c in ports}
    # The token is a 0600 file and is not on the command line
    token_file = spark_server.dir / "token"
    assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
    assert not any(spark_server.token in part for part in psutil.Process(spark_server.pid).cmdline())
    # A client without the token is refused
    from squall.spark.session import retry_policy

    spark = SparkSession.builder.remote(remote_url(spark_server.port, None)).create()
    try:
        spark.client.set_retry_policies([retry_policy(0)])
        with pytest.raises(Exception, match=r"UNAUTHENTICATED|authentication"):
            spark.range(1).collect()
    finally:
        spark.release_session_on_close = False
        spark.stop()


def test_a_new_owner_adopts_the_running_server(spark_server: Any) -> None:
    # Given a server running (as one a stopped supervisor left behind)
    pid = spark_server.pid
    # When a new owner starts on the same directory, port and token
    again = ConnectServer(spark_server.dir, port=spark_server.port, token=spark_server.token,
                          start_timeout=120, name="adopter")
    try:
        again.start(wait=True)
        # Then it watches the same JVM instead of starting a second one
        assert again.pid == pid and again.ready and again.restarts == 0
        assert again.url == spark_server.url
    finally:
        again.detach("test-done")
    assert psutil.pid_exists(pid) and spark_server.ready
