import sys

from db_connector.connector import main

sys.exit(main())
