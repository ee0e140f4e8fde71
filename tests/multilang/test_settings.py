"""How a child is launched: command line, working directory, environment,
config keys; and the context it is told about."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import pytest

from squall import Grouping, Stream, Topology
from squall.errors import ConfigError
from squall.multilang import ShellBolt
from squall.multilang.context import storm_context, wire_conf
from squall.multilang.settings import child_env, pid_dir, resolve, working_dir
from squall.testing import poll_for
from squall.worker.plan import plan_topology
from tests.multilang.harness import ADAPTERS, CHILDREN, Probe, bolt_topology, running, shell, shells


def test_argv_from_command_script_and_args() -> None:
    s = resolve({"command": "node", "script": "split.js", "args": ["-x", 3]}, {}, "c")
    assert s.argv == ["node", "split.js", "-x", "3"]
    assert (resolve({"command": ["python3", "-u"], "script": "a.py"}, {}, "c").argv
            == ["python3", "-u", "a.py"])
    with pytest.raises(ConfigError, match="needs command="):
        resolve({}, {}, "c")


def test_storm_defaults_and_config_keys() -> None:
    s = resolve({"command": "x"}, {}, "c")
    assert (s.codec.name, s.timeout, s.max_pending, s.heartbeat_secs) == ("json", 30.0, 100, 1.0)
    s = resolve({"command": "x"}, {"supervisor.worker.timeout.secs": 12}, "c")
    assert s.timeout == 12.0
    s = resolve({"command": "x"}, {"topology.subprocess.timeout.secs": 3,
                                   "supervisor.worker.timeout.secs": 12,
                                   "topology.shellbolt.max.pending": 7,
                                   "topology.multilang.serializer": "msgpack"}, "c")
    assert (s.codec.name, s.timeout, s.max_pending) == ("msgpack", 3.0, 7)
    for bad in ({"topology.shellbolt.max.pending": 0}, {"topology.subprocess.timeout.secs": "x"},
                {"topology.multilang.serializer": "org.example.Yaml"}):
        with pytest.raises(ConfigError):
            resolve({"command": "x"}, bad, "c")


def test_working_directory_rule(tmp_path: Any) -> None:
    here = str(tmp_path)
    assert working_dir({"defined_in": here}, {}) == here  # no resources/: the defining file's directory
    (tmp_path / "resources").mkdir()
    assert working_dir({"defined_in": here}, {}) == os.path.join(here, "resources")
    assert working_dir({"defined_in": here}, {"topology.multilang.resources.dir": "/srv/res"}) == "/srv/res"
    assert working_dir({"defined_in": here, "cwd": "sub"}, {"topology.multilang.resources.dir": "/x"}) == \
        os.path.join(here, "sub")
    assert working_dir({"defined_in": here, "cwd": "/abs"}, {}) == "/abs"


def test_spec_remembers_where_it_was_written() -> None:
    spec = ShellBolt.spec(command="x", outputs=["a"])
    assert spec.options["defined_in"] == os.path.dirname(os.path.abspath(__file__))


def test_environment_is_inherited_extended_and_path_appended() -> None:
    env = child_env({"FOO": 1, "PATH": "/extra"}, "msgpack")
    assert env["FOO"] == "1" and env["PATH"].endswith(os.pathsep + "/extra")
    assert env["PATH"].startswith(os.environ["PATH"])
    assert env["SQUALL_MULTILANG_SERIALIZER"] == "msgpack"


def test_pid_dir_is_the_workers_own_for_worker_processes_and_temporary_in_local_mode(tmp_path: Any) -> None:
    path, own = pid_dir({"storm.local.dir": str(tmp_path)}, "topo", "tcp://127.0.0.1:6700")
    assert path == os.path.join(str(tmp_path), "workers", "topo-tcp_127.0.0.1_6700", "pids") and not own
    assert os.path.isdir(path)
    # a worker process started by a supervisor: under its own directory, where the supervisor looks
    path, own = pid_dir({"storm.local.dir": str(tmp_path), "squall.worker.dir": str(tmp_path / "w" / "6700")},
                        "topo", "tcp://127.0.0.1:6700")
    assert path == os.path.join(str(tmp_path), "w", "6700", "pids") and not own and os.path.isdir(path)
    path, own = pid_dir({"storm.local.dir": str(tmp_path)}, "topo", "inproc://topo/worker-0")
    assert own and not path.startswith(str(tmp_path))
    os.rmdir(path)


def test_context_has_storms_shape_for_every_grouping() -> None:
    class Src(ShellBolt):
        pass

    from squall import Spout

    class S(Spout):
        outputs = (Stream(["a", "b"]), Stream(["c"], "other", direct=True))

    class T(Topology):
        s = S.spec()
        x = ShellBolt.spec(command="x", outputs=["y"],
                           inputs={s: Grouping.fields("a"), s["other"]: Grouping.direct()})
        g = ShellBolt.spec(command="x", inputs={x: Grouping.global_()})
        p = ShellBolt.spec(command="x", inputs={x: Grouping.partial_key("y")}, par=2)
        al = ShellBolt.spec(command="x", inputs={x: Grouping.all()})
        lo = ShellBolt.spec(command="x", inputs={x: Grouping.local_or_shuffle()})
        no = ShellBolt.spec(command="x", inputs={x: Grouping.none()})

    plan = plan_topology(T.definition())
    ctx = storm_context(plan, "x", plan.component_tasks["x"][0])
    assert ctx["source->stream->grouping"] == {"s": {"default": {"type": "FIELDS", "fields": ["a"]},
                                                     "other": {"type": "DIRECT"}}}
    assert ctx["source->stream->fields"] == {"s": {"default": ["a", "b"], "other": ["c"]}}
    assert ctx["stream->target->grouping"]["default"] == {
        "g": {"type": "FIELDS", "fields": []}, "p": {"type": "CUSTOM_SERIALIZED"}, "al": {"type": "ALL"},
        "lo": {"type": "LOCAL_OR_SHUFFLE"}, "no": {"type": "NONE"}}
    assert set(ctx["task->component"].values()) == {"s", "x", "g", "p", "al", "lo", "no", "__acker"}
    assert json.loads(json.dumps(ctx)) == ctx
    del Src


def test_wire_conf_is_plain_data() -> None:
    conf = wire_conf({"a": 1, "b": float("nan"), "c": object, "d": (1, [2]), "topology.auto.task.hooks": []},
                     "t")
    assert conf["topology.name"] == "t" and conf["storm.cluster.mode"] == "local"
    assert conf["b"] == "nan" and conf["c"] == "object" and conf["d"] == [1, [2]]
    json.dumps(conf)


def test_the_child_runs_in_the_directory_and_environment_it_was_given(tmp_path: Any) -> None:
    probe = Probe()
    adapter = ADAPTERS["squall-json"]
    topo = bolt_topology(adapter, probe, args=[os.path.join(CHILDREN, adapter.bolt[1])], cwd=str(tmp_path),
                         env={"SQUALL_TEST_ENV": "set"})
    with running(topo) as runner:
        shell(runner)
        done = probe.put("info", "x")
        poll_for(lambda: probe.settled(done), 5, "the info tuple")
    [[text]] = probe.got("info")
    info = json.loads(text)
    assert info["cwd"] == str(tmp_path) and info["env"] == "set"


def test_a_command_that_cannot_start_fails_the_worker_with_a_clear_error(tmp_path: Any) -> None:
    probe = Probe()
    topo = bolt_topology(ADAPTERS["squall-json"], probe, command=sys.executable, args=["no_such_script.py"],
                         cwd=str(tmp_path))
    with running(topo) as runner:
        poll_for(lambda: [e for e in list(runner.errors) if e.fatal], 10, "the launch error")
        error = next(e for e in runner.errors if e.fatal)
        assert "Error when launching multilang subprocess" in error.error
        assert "no_such_script.py" in error.error  # python's complaint, from the child's stderr


def test_a_shellbolt_subclass_may_name_its_command_storm_style() -> None:
    class Kitchen(ShellBolt):
        command = sys.executable
        script = "squall_bolt.py"

    from squall import Spout

    probe = Probe()

    class Feed(Spout):
        outputs = ("cmd", "arg")

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.sent = False

        def next_tuple(self) -> None:
            if not self.sent:
                self.sent = True
                self.emit(["split", "storm style"], tup_id=1)

        def ack(self, tup_id: Any) -> None:
            probe.settle(tup_id, True)

    class T(Topology):
        feed = Feed.spec()
        kitchen = Kitchen.spec(cwd=CHILDREN, inputs=[feed], outputs=["word"], tasks=2)

    with running(T) as runner:
        poll_for(lambda: probe.acked == [1], 5, "the tuple through the subclass")
        assert len(shells(runner, "kitchen")) == 2  # two tasks in one executor: a child each
        assert len({s.proc.pid for s in shells(runner, "kitchen")}) == 2
