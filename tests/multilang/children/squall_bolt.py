"""The kitchen-sink test bolt on Squall's own adapter (squall.multilang.child).

Same commands as pystorm_bolt.py; the serializer comes from the parent
(``SQUALL_MULTILANG_SERIALIZER``).
"""

import json
import os
import sys
import time

from squall.multilang.child import Bolt


class Kitchen(Bolt):
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
                    "topology_name": self.conf.get("topology.name"), "env": os.environ.get("SQUALL_TEST_ENV"),
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
            self.pipe.flush()
            os._exit(arg)
        elif cmd == "trickle":
            for i in range(arg[0]):
                self.emit([i], stream="echo")
                time.sleep(arg[1])
        elif cmd == "hang":
            self.pipe.flush()
            time.sleep(3600)
        elif cmd == "wait-file":
            while not os.path.exists(arg):
                time.sleep(0.005)
        elif cmd == "doubleack":
            self.ack(tup)
        elif cmd == "anchor-acked":
            self.ack(tup)
            self.emit(["late"], anchors=[tup.id])
        elif cmd == "never-sent":
            self.send_message({"command": "ack", "id": "123456789"})
        elif cmd == "garble":
            self.pipe.flush()
            os.write(self.pipe.out_fd, b"{not json\nend\n")
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


if __name__ == "__main__":
    Kitchen().run()
