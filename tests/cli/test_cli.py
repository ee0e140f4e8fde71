"""The ``squall`` command line, run for real in a subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WORDCOUNT = "examples/wordcount.py"
COMPONENTS = {"sentences", "split", "count"}


def squall(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "squall.cli", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, check=False)


def last_stats(stdout: str) -> dict[str, list[str]]:
    """The last stats table printed: component -> its columns."""
    lines = stdout.splitlines()
    headers = [i for i, line in enumerate(lines) if line.startswith("component")]
    assert headers, f"no stats header in:\n{stdout}"
    rows: dict[str, list[str]] = {}
    for line in lines[headers[-1] + 1:]:
        if not line.strip() or line.startswith("---"):
            break
        name, *columns = line.split()
        rows[name] = columns
    return rows


def test_local_runs_the_word_count_and_prints_stats() -> None:
    # When the word count example runs for 2 seconds
    result = squall("local", WORDCOUNT, "--duration", "2")

    # Then it exits cleanly, printing a stats table with a row per component
    assert result.returncode == 0, result.stderr
    header = next(line for line in result.stdout.splitlines() if line.startswith("component"))
    assert header.split()[:5] == ["component", "emitted", "executed", "acked", "failed"]
    assert "--- WordCount after" in result.stdout
    rows = last_stats(result.stdout)
    assert set(rows) >= COMPONENTS
    emitted, _executed, acked, _failed = (int(v) for v in rows["sentences"][:4])
    assert acked > 0 and emitted >= acked
    assert int(rows["split"][1]) > 0  # split executed sentences
    assert "component errors reported" not in result.stdout
    assert "Traceback" not in result.stderr


def test_local_with_a_missing_file_fails_clearly() -> None:
    result = squall("local", "examples/no_such_topology.py", "--duration", "1")
    assert result.returncode == 1
    assert "no such topology file: examples/no_such_topology.py" in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


TWO_TOPOLOGIES = textwrap.dedent("""
    from squall import Spout, Topology

    class Quiet(Spout):
        outputs = ["x"]

    class FirstTopology(Topology):
        quiet = Quiet.spec()

    class SecondTopology(Topology):
        quiet = Quiet.spec()
""")


def test_a_file_with_two_topologies_needs_topology(tmp_path: Path) -> None:
    # Given a file defining two topologies
    path = tmp_path / "two_topologies.py"
    path.write_text(TWO_TOPOLOGIES)

    # When it is run without --topology, it is refused, naming both
    result = squall("local", str(path), "--duration", "0.2")
    assert result.returncode == 1
    assert "FirstTopology" in result.stderr and "SecondTopology" in result.stderr
    assert "--topology" in result.stderr
    assert "Traceback" not in result.stderr

    # When one is picked, that one runs
    picked = squall("local", str(path), "--topology", "SecondTopology", "--duration", "0.3",
                    "--interval", "0.1")
    assert picked.returncode == 0, picked.stderr
    assert "--- SecondTopology after" in picked.stdout
    assert "quiet" in last_stats(picked.stdout)


def test_conf_overrides_reach_the_topology() -> None:
    # When the word count runs with two workers (logging at info to see them start)
    result = squall("--log-level", "info", "local", WORDCOUNT, "--duration", "1.5",
                    "--conf", "topology.workers=2")

    # Then both workers start and tuples flow across them
    assert result.returncode == 0, result.stderr
    assert "inproc://WordCount/worker-0" in result.stderr
    assert "inproc://WordCount/worker-1" in result.stderr
    rows = last_stats(result.stdout)
    assert set(rows) >= COMPONENTS
    assert int(rows["sentences"][2]) > 0


@pytest.mark.parametrize(("conf", "message"), [
    ("topology.workers", "--conf expects key=value, got 'topology.workers'"),
    ("=2", "--conf expects key=value, got '=2'"),
    ("topology.workers=0", "'topology.workers' must be >= 1"),
    ("topology.workers=two", "'topology.workers' must be int"),
])
def test_bad_conf_fails_clearly(conf: str, message: str) -> None:
    result = squall("local", WORDCOUNT, "--duration", "1", "--conf", conf)
    assert result.returncode == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_version_from_the_console_script() -> None:
    script = Path(sys.executable).parent / "squall"
    if not script.exists():
        script = Path(shutil.which("squall") or "")
    if not script.is_file():
        pytest.skip("the squall console script is not installed")
    import squall as package

    result = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=30,
                            check=False)
    assert result.returncode == 0
    # the version, and how much of the hot path a new process would load compiled
    assert result.stdout.strip().startswith(f"squall {package.__version__} (hot path compiled: ")


MISSING_CLASS = """
from squall import Topology
from squall.topology.component import ComponentSpec


class Broken(Topology):
    words = ComponentSpec("words_nowhere:Words", "spout", outputs=["word"])
"""


def test_submit_loads_every_class_before_it_sends_anything(tmp_path: Path) -> None:
    # Given a topology naming a class its package does not have, and a nimbus that is not there
    path = tmp_path / "broken.py"
    path.write_text(MISSING_CLASS)
    conf = tmp_path / "squall.yaml"
    conf.write_text("squall.secure: false\nnimbus.seeds: ['127.0.0.1:1']\n")
    # When it is submitted, the client refuses it itself, with the whole error
    result = squall("submit", str(path), "--config", str(conf))
    assert result.returncode == 1
    assert "component 'words': cannot load class 'words_nowhere:Words': No module named 'words_nowhere'" \
        in result.stderr, result.stderr
    assert "code package" not in result.stdout  # nothing packed, nothing sent


def test_a_misspelled_config_key_is_warned_with_what_was_meant() -> None:
    # (issue 30: `topology.max.spout.pendng` ran silently with the default)
    result = squall("local", WORDCOUNT, "--duration", "0.5", "--conf", "topology.max.spout.pendng=5",
                    "--conf", "myapp.batch.size=7")
    assert result.returncode == 0, result.stderr
    said = result.stdout + result.stderr
    assert "did you mean 'topology.max.spout.pending'" in said
    assert "myapp.batch.size" not in said  # a key of the user's own is not a slip


def test_output_into_a_closed_pipe_ends_quietly() -> None:
    # (issue 30: `squall info X | head` ended in a BrokenPipeError traceback)
    proc = subprocess.Popen([sys.executable, "-m", "squall.cli", "local", WORDCOUNT, "--duration", "3",
                             "--interval", "0.05"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # as `head -1` does
    _out, err = proc.communicate(timeout=60)
    assert first.startswith(b"--- WordCount")
    assert proc.returncode == 0 and b"Traceback" not in err and b"BrokenPipe" not in err, err[-2000:]


def test_local_modes_acked_per_second_is_the_current_rate(tmp_path: Path) -> None:
    # (issue 30: it was the mean since the start) A spout that acks 200 tuples in its
    # first half second and then nothing: the last table's rate is 0, not 200 / elapsed.
    path = tmp_path / "burst.py"
    path.write_text(textwrap.dedent("""
        from squall import Bolt, Spout, Topology

        class Burst(Spout):
            outputs = ["n"]

            def initialize(self, conf, context):
                self.n = 0

            def next_tuple(self):
                if self.n < 200:
                    self.n += 1
                    self.emit([self.n], tup_id=self.n)

        class Sink(Bolt):
            def process(self, tup):
                pass

        class BurstTopology(Topology):
            burst = Burst.spec()
            sink = Sink.spec(inputs=[burst])
    """))
    result = squall("local", str(path), "--duration", "3", "--interval", "1")
    assert result.returncode == 0, result.stderr
    rows = last_stats(result.stdout)
    assert rows["burst"][2] == "200" and rows["burst"][4] == "0", result.stdout[-1500:]


def test_a_components_own_info_lines_show_at_the_default_level(tmp_path: Path) -> None:
    # (issue 30: `squall local`'s default level, warning, hid a component's self.logger.info)
    path = tmp_path / "loggy.py"
    path.write_text(textwrap.dedent("""
        from squall import Bolt, Spout, Topology

        class Once(Spout):
            outputs = ["n"]

            def initialize(self, conf, context):
                self.done = False
                self.logger.info("spout says hello")
                self.logger.debug("spout debug detail")

            def next_tuple(self):
                if not self.done:
                    self.done = True
                    self.emit([1])

        class Sink(Bolt):
            def process(self, tup):
                self.logger.info("sink got a tuple", n=tup.values[0])

        class Loggy(Topology):
            once = Once.spec()
            sink = Sink.spec(inputs=[once])
    """))
    result = squall("local", str(path), "--duration", "1")
    said = result.stdout + result.stderr
    assert result.returncode == 0, said
    assert "spout says hello" in said and "sink got a tuple" in said and "component=sink" in said
    assert "spout debug detail" not in said  # --log-level debug shows it
    assert "worker started" not in said and "_user_code" not in said  # the engine stays at warning
    debug = squall("--log-level", "debug", "local", str(path), "--duration", "1")
    assert "spout debug detail" in debug.stdout + debug.stderr


def test_a_client_command_without_any_config_says_where_one_comes_from(tmp_path: Path) -> None:
    # (issue 30: forgetting --config advised `squall secrets init`)
    env = {k: v for k, v in os.environ.items() if k != "SQUALL_CONF"}
    env["HOME"] = str(tmp_path)
    result = subprocess.run([sys.executable, "-m", "squall.cli", "list"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 1
    assert "no squall.yaml was found" in result.stderr and "squall dev-cluster" in result.stderr


def test_client_commands_find_the_running_dev_clusters_config(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from squall.runtime import settings

    config = tmp_path / "dev" / "squall.yaml"
    config.parent.mkdir()
    config.write_text("nimbus.seeds: ['127.0.0.1:1']\n")
    monkeypatch.setattr(settings, "DEV_CLUSTER_POINTER", str(tmp_path / "home" / "dev-cluster"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SQUALL_CONF", raising=False)
    assert settings.config_path(None, client=True) is None
    settings.point_at_dev_cluster(config)
    assert settings.config_path(None, client=True) == config.resolve()
    assert settings.config_path(None) is None  # a daemon never takes the dev cluster's
    settings.forget_dev_cluster(tmp_path / "other.yaml")  # not ours: left
    assert settings.config_path(None, client=True) == config.resolve()
    settings.forget_dev_cluster(config)
    assert settings.config_path(None, client=True) is None


def test_a_second_dev_cluster_stopping_first_leaves_the_first_findable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # (issue 50: the second took the one pointer over and removed it on exit, while the
    # first still ran)
    import subprocess
    import sys

    from squall.runtime import settings

    monkeypatch.setattr(settings, "DEV_CLUSTER_POINTER", str(tmp_path / "home" / "dev-cluster"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SQUALL_CONF", raising=False)
    first, second = tmp_path / "a" / "squall.yaml", tmp_path / "b" / "squall.yaml"
    for config in (first, second):
        config.parent.mkdir()
        config.write_text("nimbus.seeds: ['127.0.0.1:1']\n")
    settings.point_at_dev_cluster(first)
    settings.point_at_dev_cluster(second)
    assert settings.config_path(None, client=True) == second.resolve()  # the latest started
    settings.forget_dev_cluster(second)
    assert settings.config_path(None, client=True) == first.resolve()  # the first runs on
    # A dev cluster that died without its goodbye (its pid gone) is not found.
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    settings.point_at_dev_cluster(second, pid=int(gone.stdout))
    assert settings.config_path(None, client=True) == first.resolve()


def test_a_spout_whose_trees_time_out_says_so_and_why(tmp_path: Path) -> None:
    # (issue 30: a spout whose tuples are never acked gave no hint at all; timeouts and a
    # bolt's fails were one number)
    path = tmp_path / "noack.py"
    path.write_text(textwrap.dedent("""
        from squall import Bolt, Spout, Topology

        class Numbers(Spout):
            outputs = ["n"]

            def initialize(self, conf, context):
                self.n = 0

            def next_tuple(self):
                self.n += 1
                self.emit([self.n], tup_id=self.n)

        class Hoarder(Bolt):
            auto_ack = False

            def process(self, tup):
                pass  # never acks

        class NoAck(Topology):
            config = {"topology.message.timeout.secs": 1, "topology.max.spout.pending": 10}
            numbers = Numbers.spec()
            hoarder = Hoarder.spec(inputs=[numbers])
    """))
    result = squall("local", str(path), "--duration", "4")
    said = result.stdout + result.stderr
    assert result.returncode == 0, said
    assert "tuple trees timed out" in said and "none was ever acked" in said
    numbers = last_stats(result.stdout)["numbers"]
    failed, timed_out = int(numbers[3]), int(numbers[-1])
    assert failed > 0 and timed_out == failed, numbers
