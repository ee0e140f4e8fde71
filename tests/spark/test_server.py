"""The Spark Connect server process: token, loopback, adoption."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import psutil
import pytest

from squall.security.files import write_private
from squall.spark import server as server_module
from squall.spark.server import (
    TOKEN_ENV,
    ConnectServer,
    properties_text,
    remote_url,
    server_call,
    warm_up_call,
)
from squall.testing import poll_for

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


# -- nothing secret on a command line (/proc/<pid>/cmdline is world-readable) -----------------

SECRET = "s3cr3t-T0KEN"


def test_the_warm_up_child_gets_the_token_in_its_environment_only(tmp_path: Any) -> None:
    base = {"PATH": "/bin", "SPARK_REMOTE": "sc://elsewhere", TOKEN_ENV: "the-callers-own"}
    cmd, env = warm_up_call("/usr/bin/python3", 15002, SECRET, tmp_path, base)
    assert not any(SECRET in part for part in cmd)
    assert cmd[-1] == "sc://localhost:15002" and cmd[:2] == ["/usr/bin/python3", "-c"]
    assert env[TOKEN_ENV] == SECRET and env["SPARK_HOME"] == str(tmp_path) and env["PATH"] == "/bin"
    assert "SPARK_REMOTE" not in env  # the caller's client settings do not leak into the child
    # Without a token: no token anywhere
    cmd, env = warm_up_call("python", 15002, None, tmp_path, base)
    assert TOKEN_ENV not in env and cmd[-1] == "sc://localhost:15002"


def test_the_server_gets_its_settings_from_a_private_file_and_its_token_from_the_environment(
        tmp_path: Any) -> None:
    server = ConnectServer(tmp_path / "srv", port=15999, token=SECRET,
                           conf={"spark.ssl.keyPassword": "hunter2", "spark.x": "a\\b\nc"})
    properties = server.dir / "server.properties"
    write_private(properties, properties_text(server.conf))
    cmd, env = server_call(tmp_path, name="n", master="local[1]", port=server.port, properties=properties,
                           python="python", token=server.token, base_env={"PATH": "/bin"})
    assert not any(SECRET in part or "hunter2" in part for part in cmd)
    assert cmd[cmd.index("--properties-file") + 1] == str(properties) and env[TOKEN_ENV] == SECRET
    assert stat.S_IMODE(os.stat(properties).st_mode) == 0o600
    text = properties.read_text()
    assert "spark.ssl.keyPassword=hunter2\n" in text and "spark.x=a\\\\b\\nc\n" in text
    # A file that existed with looser permissions is made private again
    os.chmod(properties, 0o644)
    write_private(properties, "x=1\n")
    assert stat.S_IMODE(os.stat(properties).st_mode) == 0o600


def test_no_spark_child_has_the_token_on_its_command_line(spark_server: Any, monkeypatch: Any) -> None:
    # Given the real server, and a look at each child's /proc/<pid>/cmdline while it runs
    seen: list[bytes] = []
    real_popen = subprocess.Popen

    def spy_run(cmd: list[str], *, check: bool, timeout: float, capture_output: bool, stdin: Any,
                env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
        with real_popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=stdin, env=env) as proc:
            # (Read until the exec shows: just after the fork the kernel may show it empty.)
            seen.append(poll_for(lambda: Path(f"/proc/{proc.pid}/cmdline").read_bytes().strip(b"\0"), 5,
                                 "the warm-up child's command line"))
            out, err = proc.communicate(timeout=timeout)
        if check and proc.returncode:
            raise subprocess.CalledProcessError(proc.returncode, cmd, out, err)
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)

    monkeypatch.setattr(server_module.subprocess, "run", spy_run)
    # When the warm-up query runs again against it (a second or two on a warm server)
    spark_server._wait_up()
    # Then it ran, and neither it nor the server shows the token to `ps`
    [cmdline] = seen
    token = spark_server.token.encode()
    assert b"-c" in cmdline.split(b"\0") and token not in cmdline
    assert token not in Path(f"/proc/{spark_server.pid}/cmdline").read_bytes()


def test_the_servers_settings_from_its_properties_file_apply(spark_server: Any) -> None:
    from pyspark.sql import SparkSession

    # (conftest's SERVER_CONF sets 2 shuffle partitions; BASE_CONF turns the UI off)
    spark = SparkSession.builder.remote(spark_server.url).create()
    try:
        assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
        assert spark.conf.get("spark.ui.enabled") == "false"
    finally:
        spark.release_session_on_close = False
        spark.stop()
