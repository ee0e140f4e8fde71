"""DRPC on a secure dev cluster: a trivial function's round trip, one client at a time, and
requests per second with concurrent clients.

    python benchmarks/drpc.py [--requests 1000] [--clients 16] [--seconds 10]

Starts a dev cluster (ZooKeeper, nimbus, a supervisor, the DRPC server; TLS and tokens as
always) in a temporary directory, submits benchmarks/topologies/drpc_echo.py, and calls
``echo`` with DRPCClient.  Printed as a table; nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1000, help="one client's requests, timed one by one")
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients for the rate")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long the concurrent clients call")
    args = parser.parse_args()

    from squall.cli.devcluster import DevCluster
    from squall.drpc import DRPCClient, DRPCExecutionError

    with tempfile.TemporaryDirectory() as tmp:
        cluster = DevCluster(Path(tmp) / "c", supervisors=1, slots=1)
        cluster.start()
        try:
            topology = str(HERE / "topologies" / "drpc_echo.py")
            subprocess.run([sys.executable, "-m", "squall.cli", "submit", topology,
                            "--name", "echo", "--config", str(cluster.config_file)],
                           check=True, capture_output=True, text=True, timeout=120)
            with DRPCClient(cluster.conf) as client:
                deadline = time.monotonic() + 120
                while True:  # the workers come up
                    try:
                        if client.execute("echo", "ready") == "ready":
                            break
                    except DRPCExecutionError:
                        pass
                    if time.monotonic() > deadline:
                        print("the topology never answered", file=sys.stderr)
                        return 1
                for _ in range(50):  # warm
                    client.execute("echo", "warm")
                took = []
                for i in range(args.requests):
                    started = time.perf_counter()
                    client.execute("echo", str(i))
                    took.append((time.perf_counter() - started) * 1000)

            done = [0] * args.clients
            stop = time.monotonic() + args.seconds

            def call(k: int) -> None:
                with DRPCClient(cluster.conf) as c:
                    while time.monotonic() < stop:
                        c.execute("echo", f"{k}")
                        done[k] += 1

            threads = [threading.Thread(target=call, args=(k,)) for k in range(args.clients)]
            started = time.monotonic()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            rate = sum(done) / (time.monotonic() - started)
        finally:
            cluster.stop()
    print("DRPC on a secure dev cluster (TLS, tokens), a linear topology of one bolt\n")
    print(f"{'measure':<44}{'value':>12}")
    print("-" * 56)
    print(f"{'round trip p50 (ms), one client':<44}{percentile(took, 0.5):>12.2f}")
    print(f"{'round trip p99 (ms), one client':<44}{percentile(took, 0.99):>12.2f}")
    print(f"{'requests/s, ' + str(args.clients) + ' concurrent clients':<44}{rate:>12,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
