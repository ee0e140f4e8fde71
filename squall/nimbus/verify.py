"""``python -m squall.nimbus.verify CODE_DIR``: load a submitted topology's
classes in a throwaway process (user modules may do anything at import) and
report what does not load.  The definition arrives on stdin as JSON."""

from __future__ import annotations

import json
import sys

from squall.errors import SquallError
from squall.topology.loading import verify_loadable
from squall.topology.topology import definition_from_dict


def main(argv: list[str]) -> int:
    if argv and argv[0]:
        sys.path.insert(0, argv[0])
    try:
        verify_loadable(definition_from_dict(json.load(sys.stdin)))
    except SquallError as e:
        print(str(e))
        return 1
    except Exception as e:  # noqa: BLE001 - user code raised at import
        print(f"importing the topology's code raised {type(e).__name__}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
