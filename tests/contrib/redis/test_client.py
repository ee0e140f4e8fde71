"""Connecting to Redis: a clear, redacted error after a bounded backoff, and reconnects after a restart."""

from __future__ import annotations

import time

import pytest

from squall.contrib.redis.client import Backoff, RedisUnavailable, call_with_retry, client, connect, redact
from squall.contrib.redis.devserver import DevRedis
from squall.runtime.ports import free_port


def test_redact_hides_only_the_password() -> None:
    assert redact("redis://:s3cret@127.0.0.1:6379/0") == "redis://:***@127.0.0.1:6379/0"
    assert redact("redis://bob:s3cret@host:1/2") == "redis://bob:***@host:1/2"
    assert redact("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"


def test_backoff_doubles_up_to_its_cap() -> None:
    b = Backoff(initial=0.1, max_delay=0.5, attempts=5)
    assert [b.delay(n) for n in range(1, 6)] == [0.1, 0.2, 0.4, 0.5, 0.5]
    assert b.total() == pytest.approx(1.2)
    assert b.ready(0.0)
    assert b.failed(10.0) == 0.1
    assert not b.ready(10.05)
    assert b.ready(10.1)
    b.succeeded()
    assert b.ready(0.0)
    with pytest.raises(ValueError, match="initial"):
        Backoff(initial=0)


def test_an_unreachable_redis_is_a_clear_error_naming_what_and_the_redacted_url() -> None:
    url = f"redis://:hunter2@127.0.0.1:{free_port()}/0"
    sleeps: list[float] = []
    with pytest.raises(RedisUnavailable) as info:
        connect(url, what="spout 'events'", backoff=Backoff(initial=0.01, max_delay=0.04, attempts=4),
                sleep=sleeps.append)
    message = str(info.value)
    assert "spout 'events'" in message
    assert "redis://:***@127.0.0.1" in message
    assert "hunter2" not in message
    assert "after 4 attempts" in message
    assert sleeps == [0.01, 0.02, 0.04]


def test_a_wrong_password_is_not_retried(tmp_path) -> None:
    with DevRedis(tmp_path / "r", password="right") as server:
        url = server.url.replace(":right@", ":wrong@")
        sleeps: list[float] = []
        with pytest.raises(RedisUnavailable, match="refused the credentials") as info:
            connect(url, what="test", sleep=sleeps.append)
        assert "wrong" not in str(info.value)
        assert sleeps == []


def test_connect_waits_for_a_redis_that_comes_up(tmp_path) -> None:
    server = DevRedis(tmp_path / "r")
    started = []

    def sleep(seconds: float) -> None:
        # The second retry finds it up: start the server "while we wait".
        if not started:
            server.start()
            started.append(True)

    try:
        conn = connect(server.url, what="test", sleep=sleep)
        assert conn.ping()
        conn.close()
    finally:
        server.stop()


def test_commands_reconnect_after_a_redis_restart_and_aof_keeps_the_data(redis_server: DevRedis) -> None:
    conn = connect(redis_server.url, what="test")
    conn.set("k", "v")
    redis_server.kill()
    with pytest.raises(RedisUnavailable):
        call_with_retry(lambda: conn.get("k"), what="test", url=redis_server.url,
                        backoff=Backoff(initial=0.01, max_delay=0.01, attempts=2))
    redis_server.restart()  # after kill(): closes the dead server's log, starts it again
    assert call_with_retry(lambda: conn.get("k"), what="test", url=redis_server.url) == b"v"
    conn.close()


def test_call_with_retry_rides_out_a_short_outage(redis_server: DevRedis) -> None:
    conn = connect(redis_server.url, what="test")
    redis_server.kill()
    restarted = []

    def sleep(seconds: float) -> None:
        if not restarted:
            redis_server.restart()
            restarted.append(time.monotonic())

    assert call_with_retry(conn.ping, what="test", url=redis_server.url, sleep=sleep)
    assert restarted
    conn.close()


def test_a_command_error_is_not_retried(redis_server: DevRedis) -> None:
    import redis

    conn = connect(redis_server.url, what="test")
    conn.set("s", "text")
    sleeps: list[float] = []
    with pytest.raises(redis.ResponseError):
        call_with_retry(lambda: conn.hgetall("s"), what="test", url=redis_server.url, sleep=sleeps.append)
    assert sleeps == []
    conn.close()


def test_replies_are_parsed_by_hiredis(redis_server: DevRedis) -> None:
    """The squall[redis] extra brings hiredis, and redis-py parses with it: a stream
    spout spends most of its time in reply parsing."""
    from redis.utils import HIREDIS_AVAILABLE

    assert HIREDIS_AVAILABLE
    conn = client(redis_server.url)
    try:
        conn.xadd("s", {"n": "1", "bin": b"\r\n\x00"})
        ((_entry_id, fields),) = conn.xrange("s")
        assert fields == {b"n": b"1", b"bin": b"\r\n\x00"}
        parser = conn.connection_pool.get_connection()._parser
        assert type(parser).__name__ == "_HiredisParser"
    finally:
        conn.close()
