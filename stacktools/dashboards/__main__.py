"""``python -m stacktools.dashboards``: see :mod:`stacktools.dashboards.cli`."""

import sys

from stacktools.dashboards.cli import main

sys.exit(main())
