import sys

from stacktools.demo.cli import main

sys.exit(main())
