import sys

from stacktools.config_reference.cli import main

sys.exit(main())
