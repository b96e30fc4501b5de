import sys

from alert_forwarder.forwarder import main

sys.exit(main())
