"""The admission rules every user-controlled value passes (squall.security.admission):
one pattern for names and ids, keys only the cluster's conf sets, environment
variables a topology may not set, roots that may not overlap."""

from __future__ import annotations

import base64

import cloudpickle
import pytest

from squall.errors import ConfigError, TopologyValidationError
from squall.security.admission import (
    allowed_environment,
    check_cluster_roots,
    check_environment,
    check_id,
    check_topology_conf,
    cluster_only_removed,
)
from squall.security.redact import PICKLE_HIDDEN, redact_answer


@pytest.mark.parametrize("good", ["wc", "WordCount", "tx-own", "a_b", "_x", "9lives", "x" * 128])
def test_names_and_ids_that_are_one_path_component_pass(good: str) -> None:
    assert check_id("name", good) == good


@pytest.mark.parametrize("bad", ["", ".", "..", "../../../etc", "a/b", "-rf", ".hidden", "a b", "a.b", "a:b",
                                 "a\0b", "x" * 129, "é", None, 7, ["x"]])
def test_anything_else_is_refused_naming_what(bad: object) -> None:
    rule = r"the definition's name .* must be 1-128 letters, digits, '_' or '-'"
    with pytest.raises(TopologyValidationError, match=rule):
        check_id("the definition's name", bad)


@pytest.mark.parametrize("key", ["transactional.zookeeper.root", "storm.local.dir",
                                 "storm.zookeeper.servers", "supervisor.worker.uids",
                                 "supervisor.run.worker.as.user", "nimbus.admins", "logviewer.port",
                                 "squall.secure", "squall.keyring.path", "squall.worker.dir",
                                 "drpc.authorizer.acl", "spark.connect.server.conf",
                                 "squall.env.build.allow"])
def test_keys_that_steer_daemons_are_refused_in_a_topologys_conf(key: str) -> None:
    with pytest.raises(ConfigError, match=rf"sets {key.replace('.', '[.]')}: this key steers"):
        check_topology_conf({key: "x", "topology.workers": 2})
    assert cluster_only_removed({key: "x", "topology.workers": 2}) == {"topology.workers": 2}


def test_what_a_topology_may_set_passes() -> None:
    conf = {"topology.workers": 2, "topology.transactional.id": "t",
            "transactional.zookeeper.servers": ["zk"], "drpc.servers": ["d"], "my.own.key": 1,
            "spark.remote": "sc://x", "squall.state.dir": "/data",
            "topology.environment": {"PATH": "/opt/bin:/usr/bin", "MY_SETTING": 1, "EMPTY": None}}
    check_topology_conf(conf)
    assert cluster_only_removed(conf) == conf


@pytest.mark.parametrize("name", ["LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "GCONV_PATH", "GLIBC_TUNABLES",
                                  "MALLOC_CHECK_", "NLSPATH", "LOCPATH", "SQUALL_NODE", "BAD=NAME", "1X", ""])
def test_loader_variables_and_squalls_own_are_refused_in_the_environment(name: str) -> None:
    with pytest.raises(ConfigError, match=r"topology\.environment names"):
        check_environment({name: "x"})
    kept, dropped = allowed_environment({name: "x", "PATH": "/usr/bin"})
    assert kept == {"PATH": "/usr/bin"} and dropped == [name]


def test_environment_values_must_be_plain_and_bounded() -> None:
    for bad in ({"X": {"a": 1}}, {"X": "a\0b"}, {"X": "x" * 40000}, ["X"]):
        with pytest.raises(ConfigError, match=r"topology\.environment"):
            check_environment(bad)


def test_the_zookeeper_roots_may_not_hold_one_another() -> None:
    check_cluster_roots("/squall", "/transactional")
    check_cluster_roots("/squall", "/squall-transactional")
    overlapping = (("/squall", "/squall"), ("/squall", "/"), ("/squall", "/squall/tx"), ("/a/squall", "/a"))
    for storm, tx in overlapping:
        with pytest.raises(ConfigError, match="may not be one inside the other"):
            check_cluster_roots(storm, tx)


def test_a_pickle_in_an_answer_is_never_shown() -> None:
    shipped = base64.b64encode(cloudpickle.dumps(lambda x: x * 2)).decode()
    answer = {"definition": {"components": [{"options": {"function": shipped, "fields": ["gAWAIN"]}}]}}
    shown = redact_answer(answer)
    options = shown["definition"]["components"][0]["options"]
    assert options == {"function": PICKLE_HIDDEN, "fields": ["gAWAIN"]}


def test_a_streams_api_bolts_operations_are_never_shown() -> None:
    """A Streams API topology's generated bolts carry their operations pickled; what nimbus
    serves of its definition shows their names, never the pickle (docs/security.md)."""
    from squall import Spout
    from squall.streams import StreamBuilder, ValueMapper

    class Words(Spout):
        outputs = ["word"]

    builder = StreamBuilder()
    builder.new_stream(Words, ValueMapper(0)).map(str.upper).print()
    shown = redact_answer({"definition": builder.build().definition().to_dict()})
    bolt = next(c for c in shown["definition"]["components"] if c["name"] == "bolt1")
    assert bolt["options"]["streams"]["plan"] == PICKLE_HIDDEN
    assert bolt["options"]["operations"] == ["map_tuple(<lambda>)", "map(upper)", "print"]


def test_a_users_name_may_hold_dots_but_never_be_a_path() -> None:
    from squall.security.admission import check_user_name

    assert check_user_name("owner", "john.doe") == "john.doe"
    for bad in ("..", ".", ".hidden", "a/b", "-x", ""):
        with pytest.raises(TopologyValidationError, match="owner"):
            check_user_name("owner", bad)
