"""``python -m sparc_es`` is the ``sparc-es`` console script."""

import sys

from .cli import main

sys.exit(main())
