"""``python -m squall.nimbus.verify CODE_DIR``: load a submitted topology's
classes in a throwaway process (user modules may do anything at import) and
report what does not load.  ``{"definition", "nonce"}`` arrives on stdin as
JSON; success is the last line ``verified <nonce>``, printed only once every
class loaded (an exit code of 0 alone proves nothing: user code may exit)."""

from __future__ import annotations

import json
import sys

from squall.errors import SquallError
from squall.topology.topology import definition_from_dict
from squall.topology.verify import verify_loadable


def main(argv: list[str]) -> int:
    if argv and argv[0]:
        sys.path.insert(0, argv[0])
    request = json.load(sys.stdin)
    try:
        verify_loadable(definition_from_dict(request["definition"]))
    except SquallError as e:
        print(str(e))
        return 1
    except Exception as e:  # noqa: BLE001 - user code raised at import
        print(f"importing the topology's code raised {type(e).__name__}: {e}")
        return 1
    print(f"verified {request['nonce']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
