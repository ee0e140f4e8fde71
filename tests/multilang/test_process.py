"""ShellProcess alone, on a real child, with the clock driven by the test."""

from __future__ import annotations

import sys
import threading
from typing import Any

from squall.clock import FakeClock
from squall.multilang.codec import JsonCodec
from squall.multilang.errors import ChildDied
from squall.multilang.process import ShellProcess
from squall.testing import poll_for
from tests.helpers import stay

# Answers the handshake, then syncs every heartbeat unless told to play dead.
CHILD = r"""
import json, os, sys, time
def read():
    lines = []
    while True:
        line = sys.stdin.readline()
        if not line:
            sys.exit(0)
        if line == "end\n":
            return json.loads("".join(lines))
        lines.append(line)
def send(msg):
    sys.stdout.write(json.dumps(msg) + "\nend\n"); sys.stdout.flush()
read()
send({"pid": os.getpid()})
while True:
    msg = read()
    if msg.get("stream") == "__heartbeat":
        if len(sys.argv) > 1:
            time.sleep(3600)  # hung
        send({"command": "sync"})
"""


class Owner:
    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.died: list[ChildDied] = []

    def on_messages(self, proc: ShellProcess, messages: list[Any]) -> None:
        self.messages.extend(messages)

    def on_exit(self, proc: ShellProcess, died: ChildDied) -> None:
        self.died.append(died)


def launch(clock: FakeClock, owner: Owner, *args: str) -> ShellProcess:
    proc = ShellProcess([sys.executable, "-c", CHILD, *args], codec=JsonCodec(), cwd=None, env=None,
                        timeout=30, heartbeat_secs=1.0, owner_alive=threading.main_thread().is_alive,
                        on_messages=owner.on_messages, on_exit=owner.on_exit, now=clock.now)
    assert proc.start({}, {}, "/tmp") == []
    proc.run()
    return proc


def test_heartbeats_follow_the_clock_and_syncs_keep_the_child_alive() -> None:
    clock, owner = FakeClock(), Owner()
    proc = launch(clock, owner)
    try:
        for n in range(1, 4):
            clock.advance(1.0)
            poll_for(lambda n=n: len(owner.messages) >= n, 5, f"sync #{n}")
            clock.advance(20)  # long after, but it answered: alive
        assert owner.messages == [{"command": "sync"}] * 3 and owner.died == []
    finally:
        proc.close()


def test_a_child_silent_past_the_timeout_is_killed_with_its_report() -> None:
    clock, owner = FakeClock(), Owner()
    proc = launch(clock, owner, "hang")
    clock.advance(1.0)  # a heartbeat it will never answer
    clock.advance(28.5)  # 29.5 s of silence: still within the timeout
    assert stay(lambda: owner.died == [], 0.3)
    clock.advance(1.0)
    [died] = poll_for(lambda: owner.died, 5, "the child declared dead")
    assert "subprocess heartbeat timeout (30s" in str(died) and "killed by signal SIGKILL" in str(died)
    assert proc.popen is not None and proc.popen.poll() is not None


def test_an_unexpected_error_in_the_reader_is_a_reported_death_not_a_silent_one() -> None:
    # Given a child whose output the reader cannot take (a decoder that raises what no one expects)
    clock, owner = FakeClock(), Owner()
    proc = launch(clock, owner)
    pid = proc.pid

    class Broken:
        def feed(self, data: bytes) -> list[Any]:
            raise RuntimeError("decoder bug")

    assert proc.conn is not None
    proc.conn.decoder = Broken()  # type: ignore[assignment]
    try:
        # When the child answers a heartbeat
        clock.advance(1.0)
        # Then the reader reports the child dead, with the cause, and the child is killed
        [died] = poll_for(lambda: owner.died, 5, "the child declared dead")
        assert "reading the child's output failed: RuntimeError: decoder bug" in str(died)
        assert proc.popen is not None and proc.popen.poll() is not None and pid is not None
    finally:
        proc.close()


def test_a_message_over_the_cap_is_a_death_naming_the_cap() -> None:
    clock, owner = FakeClock(), Owner()
    child = CHILD.replace('send({"command": "sync"})', 'send({"command": "sync", "pad": "x" * 5000})')
    proc = ShellProcess([sys.executable, "-c", child], codec=JsonCodec(), cwd=None, env=None,
                        timeout=30, heartbeat_secs=1.0, owner_alive=threading.main_thread().is_alive,
                        on_messages=owner.on_messages, on_exit=owner.on_exit, now=clock.now,
                        max_message_bytes=4096, component="shell")
    assert proc.start({}, {}, "/tmp") == []
    proc.run()
    try:
        clock.advance(1.0)
        [died] = poll_for(lambda: owner.died, 5, "the child declared dead")
        text = str(died)
        assert "over the limit of 4096 bytes (topology.multilang.max.message.bytes)" in text
        assert "component: shell" in text and owner.messages == []
    finally:
        proc.close()
