"""``python -m squall.cli ...``: the ``squall`` command."""

import sys

from squall.cli.main import main

sys.exit(main())
