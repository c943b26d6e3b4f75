"""``python -m sparc_es`` is the ``sparc-es`` console script."""

import sys

from sparc_es.cli import main

sys.exit(main())
