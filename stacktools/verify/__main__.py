import sys

from stacktools.verify.cli import main

sys.exit(main())
