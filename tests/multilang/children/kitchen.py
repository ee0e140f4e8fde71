"""The kitchen-sink test children's one body, whichever adapter runs it.

``pystorm_bolt.py``/``pystorm_spout.py`` (pystorm from PyPI, unmodified) and
``squall_bolt.py``/``squall_spout.py`` (squall.multilang.child) each mix these into
their adapter's Bolt or Spout and say only what differs between the adapters: how to
flush what was sent, which fd the protocol is written on, and the topology's name.
The commands are in README.md.  Imported as a sibling module: a child runs as a
script from this directory, which is then first on its import path.
"""

import json
import os
import sys
import time


class KitchenBolt:
    """Does what each input tuple ``(cmd, arg)`` asks."""

    def flush_sent(self):
        """Send what the adapter has buffered, before the child exits, hangs or garbles."""
        raise NotImplementedError

    def protocol_fd(self):
        """The fd the protocol is written on."""
        raise NotImplementedError

    def topology_name_of(self):
        """The topology's name, as the adapter knows it."""
        raise NotImplementedError

    def process(self, tup):
        cmd, arg = tup.values
        if cmd == "split":
            for word in arg.split():
                self.emit([word])
        elif cmd == "ids":
            ids = [self.emit([n], stream="counts", need_task_ids=True) for n in arg]
            ids.append(self.emit([0], stream="nowhere", need_task_ids=True))
            self.emit([ids], stream="ids")
        elif cmd == "direct":
            self.emit([str(arg)], stream="direct", direct_task=arg)
        elif cmd == "echo":
            self.emit([arg], stream="echo")
        elif cmd == "failme":
            self.emit([arg], stream="failme")
        elif cmd == "failme-string-anchor":
            self.send_message({"command": "emit", "tuple": [arg], "stream": "failme", "anchors": tup.id,
                               "need_task_ids": False})
        elif cmd == "info":
            info = {"context": self.context, "component_name": self.component_name, "task_id": self.task_id,
                    "pid": os.getpid(), "cwd": os.getcwd(), "values_type": type(tup.values).__name__,
                    "fields": list(getattr(tup.values, "_fields", [])), "arg_via_field": tup.values.arg,
                    "topology_name": self.topology_name_of(), "env": os.environ.get("SQUALL_TEST_ENV"),
                    "serializer": os.environ.get("SQUALL_MULTILANG_SERIALIZER")}
            self.emit([json.dumps(info)], stream="info")
        elif cmd == "log":
            for level in ("trace", "debug", "info", "warn", "error"):
                self.log(f"level {level}", level=level)
            self.send_message({"command": "log", "msg": "level missing"})
            self.send_message({"command": "log", "msg": "level odd", "level": "loud"})
            self.send_message({"command": "log", "msg": "level high", "level": 9})
        elif cmd == "error":
            self.send_message({"command": "error", "msg": arg})
        elif cmd == "metrics":
            for name, value in arg:
                self.report_metric(name, value)
        elif cmd == "print":
            print(f"printed {arg}", flush=True)
            sys.stderr.write(f"stderr {arg}\n")
            sys.stderr.flush()
        elif cmd == "crash":
            raise RuntimeError(arg)
        elif cmd == "exit":
            sys.stderr.write(f"exiting with {arg}\n")
            sys.stderr.flush()
            self.flush_sent()
            os._exit(arg)
        elif cmd == "trickle":
            for i in range(arg[0]):
                self.emit([i], stream="echo")
                time.sleep(arg[1])
        elif cmd == "hang":
            self.flush_sent()
            time.sleep(3600)
        elif cmd == "wait-file":
            while not os.path.exists(arg):
                time.sleep(0.005)
        elif cmd == "doubleack":
            self.ack(tup)  # an adapter that acks after process acks it again
        elif cmd == "anchor-acked":
            self.ack(tup)
            self.emit(["late"], anchors=[tup.id])
        elif cmd == "never-sent":
            self.send_message({"command": "ack", "id": "123456789"})
        elif cmd == "garble":
            self.flush_sent()
            os.write(self.protocol_fd(), b"{not json\nend\n")
        elif cmd == "bogus":
            self.send_message({"command": "bogus", "x": 1})
        elif cmd == "nocommand":
            self.send_message({"tuple": [1]})
        elif cmd == "badtask":
            self.send_message({"command": "emit", "tuple": ["x"], "stream": "direct", "task": str(arg)})
        elif cmd == "badstream":
            self.emit([arg], stream="undeclared")
        elif cmd == "bigint":
            self.emit([2 ** 70], stream="echo")
        elif cmd == "badanchor":
            anchors = {"nested": [[tup.id]], "dict": {"id": tup.id}, "float": 1.5, "bool": [True]}[arg]
            self.send_message({"command": "emit", "tuple": ["x"], "stream": "echo", "anchors": anchors})
        elif cmd == "raw":
            self.send_message(arg)
        elif cmd == "oversize":
            self.emit(["x" * arg], stream="echo")

    def process_tick(self, tup):
        self.emit([["tick", list(tup.values), tup.component, tup.stream, tup.task]], stream="echo")



class KitchenSpout:
    """Emits the topology conf's ``test.spout.items`` (``[[msg_id, sentence], ...]``), in
    order, one per ``next`` (``msg_id`` null = unreliable).  Special sentences: ``ASK``
    (emit asking for task ids, report them), ``EMPTY`` (emit nothing), ``HANG``,
    ``EXIT``, ``ILLEGAL`` (send an ack command, which spouts may not), ``BIG <n>`` (emit
    a string of n characters).  Acks, fails, activate and deactivate are reported on
    the ``events`` stream as JSON; with ``test.spout.replay`` a failed item is emitted
    again."""

    def flush_sent(self):
        """Send what the adapter has buffered, before the child exits or hangs."""
        raise NotImplementedError

    def initialize(self, storm_conf, context):
        self.items = [tuple(item) for item in storm_conf.get("test.spout.items", [])]
        self.by_id = {json.dumps(i): s for i, s in self.items}
        self.replay = storm_conf.get("test.spout.replay", False)
        self.todo = list(self.items)
        self.event(["started", os.getpid()])

    def event(self, what):
        self.emit([json.dumps(what)], stream="events")

    def activate(self):
        self.event(["activate"])

    def deactivate(self):
        self.event(["deactivate"])

    def next_tuple(self):
        if not self.todo:
            return
        msg_id, sentence = self.todo.pop(0)
        if sentence == "EMPTY":
            return
        if sentence == "HANG":
            self.flush_sent()
            time.sleep(3600)
        if sentence == "EXIT":
            self.flush_sent()
            os._exit(3)
        if sentence == "ILLEGAL":
            self.send_message({"command": "ack", "id": msg_id})
            return
        if sentence.startswith("BIG "):
            self.emit(["x" * int(sentence[4:])], tup_id=msg_id)
            return
        if sentence == "ASK":
            ids = self.emit([sentence], tup_id=msg_id, need_task_ids=True)
            self.event(["ids", ids])
            return
        self.emit([sentence], tup_id=msg_id)

    def ack(self, tup_id):
        self.event(["ack", tup_id])

    def fail(self, tup_id):
        self.event(["fail", tup_id])
        if self.replay:
            self.todo.append((tup_id, self.by_id[json.dumps(tup_id)]))

