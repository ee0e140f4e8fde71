"""Every file and directory a dev cluster makes under its root is its user's only
(0600/0700 from the first byte): the config with its keyring's path, the logs, the pid
records, ZooKeeper's data, the supervisors' and workers' directories (issue 29, finding 3).

Real processes: a secure DevCluster in this process (a ZooKeeper JVM, nimbus, one
supervisor) running the word count in one worker; free ports only."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from squall import config as config_mod
from squall.cli.devcluster import DevCluster
from squall.testing import poll_for

REPO = Path(__file__).resolve().parents[2]


def loose_modes(root: Path) -> list[str]:
    """What under ``root`` (itself included) anyone but its owner may read, write or enter:
    others, through folders they may enter; a group, unless it is a sandboxed topology's
    own (its workers read their code and write their slot through it, issue 29)."""
    first, last = config_mod.DEFAULTS["supervisor.worker.uids"]
    out = []
    for path in [root, *root.rglob("*")]:
        try:
            st = path.lstat()
        except FileNotFoundError:  # a temporary file, replaced meanwhile
            continue
        mode = stat.S_IMODE(st.st_mode)
        if stat.S_ISLNK(st.st_mode):
            continue
        inside = [p for p in path.parents if p == root or root in p.parents]
        reachable = all(p.stat().st_mode & stat.S_IXOTH for p in inside)
        by_others = bool(mode & 0o007) and reachable
        by_group = bool(mode & 0o070) and not first <= st.st_gid <= last
        if by_others or by_group:
            out.append(f"{oct(mode)} {path.relative_to(root.parent)}")
    return out


def test_a_dev_cluster_keeps_its_files_to_its_user(tmp_path: Path) -> None:
    # Given a root left world-readable by an earlier run, and this process's usual umask
    root = tmp_path / "dev"
    root.mkdir(mode=0o755)
    os.chmod(root, 0o755)
    umask = os.umask(0o022)
    os.umask(umask)
    cluster = DevCluster(root, supervisors=1, slots=1)
    try:
        # When the cluster starts and runs a topology (a worker's directories and files too)
        cluster.start()
        assert os.umask(umask) == umask, "DevCluster.start left this process's umask changed"
        submit = subprocess.run(
            [sys.executable, "-m", "squall.cli", "--config", str(cluster.config_file), "submit",
             "examples/wordcount.py", "--conf", "topology.workers=1"],
            capture_output=True, text=True, timeout=60, cwd=REPO, check=False)
        assert submit.returncode == 0, submit.stdout + submit.stderr
        poll_for(lambda: cluster.worker_pids(), timeout=60, message="a worker process", interval=0.2)
        # Then nothing under the root is open to the group or to others
        assert (root / "zookeeper").is_dir() and (root / "logs" / "nimbus-0.log").is_file()
        offenders = loose_modes(root)
        assert not offenders, "open to group/others:\n" + "\n".join(offenders)
    finally:
        cluster.stop()
