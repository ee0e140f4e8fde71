"""``python -m squall.worker --dir WORKER_DIR``: see :mod:`squall.worker.main`."""

from __future__ import annotations

import os
import sys

from squall.worker.main import main

code = main()
sys.stdout.flush()
sys.stderr.flush()
# Leave at once: threads of a dead worker may still be stuck in user code,
# and nothing is left to clean up (the worker stopped, files are written).
os._exit(code)
