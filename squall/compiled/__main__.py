"""``python -m squall.compiled [build|status]``."""

import sys

from squall.compiled.build import main

sys.exit(main())
