"""What CURVE costs one worker-to-worker link: frames through a real ZmqTransport
pair on loopback, plain and with the topology's CURVE keypair, side by side.

    python benchmarks/curve.py [--frames 20000]

The frames are real wire frames of the word count's split -> count edge
(``serialization.encode`` of 10, 100 and 1,000 tuples with one anchor each),
so the sizes are those a busy worker sends.  The sender and the receiver run
in two threads of this process; the numbers are frames and megabytes per
second, best of three runs.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from squall.security import curve  # noqa: E402
from squall.topology.tuple import Tuple, record_type  # noqa: E402
from squall.worker.wire import codec as serialization  # noqa: E402
from squall.worker.wire.zmq_transport import ZmqTransport  # noqa: E402

WORD = record_type(("word",))


def frame(tuples: int) -> bytes:
    batch = [Tuple(i, "split", "default", 3, WORD(f"word{i % 200}"), {i * 7919: i * 104729})
             for i in range(tuples)]
    return serialization.encode([("data", 5, batch)])


def run(data: bytes, frames: int, secure: bool) -> float:
    """Seconds to move ``frames`` copies of ``data`` from one transport to another."""
    keys = curve.raw(curve.new_keypair()) if secure else None
    receiving = ZmqTransport(curve=keys, recv_hwm=10_000)
    sending = ZmqTransport(curve=keys, send_hwm=10_000)
    receiver = receiving.bind("zmq+tcp://127.0.0.1:0")
    sender = sending.connect(receiver.address)
    got = 0
    done = threading.Event()

    def drain() -> None:
        nonlocal got
        while got < frames:
            if receiver.recv(1.0) is not None:
                got += 1
        done.set()

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    while receiver.recv(0.01) is None and got == 0:  # handshake: one frame through first
        sender.send(data)
        time.sleep(0.01)
    got = 0
    started = time.perf_counter()
    for _ in range(frames):
        sender.send(data)
        while sending.dropped:  # a full queue: wait for the receiver, never lose a frame here
            sending.dropped -= 1
            time.sleep(0.0005)
            sender.send(data)
    done.wait(120)
    elapsed = time.perf_counter() - started
    sender.close()
    receiver.close()
    sending.close()
    receiving.close()
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=20_000)
    args = parser.parse_args()
    print("one link, sender and receiver threads in one process, best of 3\n")
    print(f"{'tuples/frame':>12}{'bytes':>9}{'plain frames/s':>16}{'CURVE frames/s':>16}"
          f"{'plain MB/s':>12}{'CURVE MB/s':>12}{'CURVE cost':>12}")
    for tuples in (10, 100, 1000):
        data = frame(tuples)
        n = max(200, args.frames // max(1, tuples // 10))
        plain = min(run(data, n, False) for _ in range(3))
        secure = min(run(data, n, True) for _ in range(3))
        print(f"{tuples:>12}{len(data):>9}{n / plain:>16,.0f}{n / secure:>16,.0f}"
              f"{n * len(data) / plain / 1e6:>12,.0f}{n * len(data) / secure / 1e6:>12,.0f}"
              f"{(secure - plain) / n * 1e6:>10.1f}µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
