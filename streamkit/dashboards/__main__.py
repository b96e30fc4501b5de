"""``python -m streamkit.dashboards``: see :mod:`streamkit.dashboards.cli`."""
import sys

from streamkit.dashboards.cli import main

sys.exit(main())
