import sys

from mqtt_bridge.bridge import main

sys.exit(main())
