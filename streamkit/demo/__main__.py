import sys

from streamkit.demo.cli import main

sys.exit(main())
