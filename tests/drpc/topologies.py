"""Bolts of Storm's DRPC integration tests (DRPCIntegrationTest, drpc_test.clj), in Squall."""

from __future__ import annotations

from typing import Any

from squall import BasicBolt, Bolt, FailedException


class ExclamationBolt(BasicBolt):
    """[args, return_info] -> [args!!!, return_info]: for a plain DRPCSpout topology."""

    outputs = ["result", "return_info"]

    def process(self, tup: Any) -> None:
        self.emit([tup.values[0] + "!!!", tup.values[1]])


class ExclamationBoltDrpc(BasicBolt):
    """[id, args] -> [id, args!!!]: the linear builder's contract."""

    outputs = ["id", "result"]

    def process(self, tup: Any) -> None:
        self.emit([tup.values[0], tup.values[1] + "!!!"])


class CreateTuples(BasicBolt):
    """N -> N*N tuples of the request."""

    outputs = ["request"]

    def process(self, tup: Any) -> None:
        for _ in range(int(tup.values[1]) ** 2):
            self.emit([tup.values[0]])


class PartialCount(Bolt):
    """Counts its tuples of each request; the count once it has them all."""

    auto_ack = False
    outputs = ["request", "count"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.counts: dict[Any, int] = {}

    def process(self, tup: Any) -> None:
        self.counts[tup.values[0]] = self.counts.get(tup.values[0], 0) + 1
        self.ack(tup)

    def finished_id(self, request_id: Any) -> None:
        self.emit([request_id, self.counts.pop(request_id, 0)])


class CountAggregator(PartialCount):
    outputs = ["request", "total"]

    def process(self, tup: Any) -> None:
        self.counts[tup.values[0]] = self.counts.get(tup.values[0], 0) + tup.values[1]
        self.ack(tup)


class IdBolt(BasicBolt):
    outputs = ["request", "val"]

    def process(self, tup: Any) -> None:
        self.emit(list(tup.values))


class EmitFinish(Bolt):
    auto_ack = False
    outputs = ["request", "result"]

    def process(self, tup: Any) -> None:
        self.ack(tup)

    def finished_id(self, request_id: Any) -> None:
        self.emit([request_id, "done"])


class FailFinishBolt(Bolt):
    outputs = ["request", "result"]

    def process(self, tup: Any) -> None:
        pass

    def finished_id(self, request_id: Any) -> None:
        raise FailedException


class FailingBolt(BasicBolt):
    """Fails the request's tuple when its args say so."""

    outputs = ["id", "result"]

    def process(self, tup: Any) -> None:
        if tup.values[1] == "fail":
            raise FailedException
        self.emit([tup.values[0], tup.values[1]])


class NoIdBolt(BasicBolt):
    """Breaks the contract: its tuples do not start with the request id."""

    outputs = ["id", "result"]

    def process(self, tup: Any) -> None:
        self.emit(["not the id", tup.values[1]])


class ReachFollowers(BasicBolt):
    """[id, n] -> [id, follower] for followers 0..n-1, each twice (two tweeters share them)."""

    outputs = ["id", "follower"]

    def process(self, tup: Any) -> None:
        for _ in range(2):
            for follower in range(int(tup.values[1])):
                self.emit([tup.values[0], f"user{follower}"])


class PartialUniquer(Bolt):
    """Storm's Distributed-RPC.md: the distinct followers this task saw, once it has them all."""

    auto_ack = False
    outputs = ["id", "partial_count"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.followers: dict[Any, set[str]] = {}

    def process(self, tup: Any) -> None:
        self.followers.setdefault(tup.values[0], set()).add(tup.values[1])
        self.ack(tup)

    def finished_id(self, request_id: Any) -> None:
        self.emit([request_id, len(self.followers.pop(request_id, ()))])

