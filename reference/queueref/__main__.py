"""`python -m queueref` is the `queueref` command."""

import sys

from queueref.cli.main import main

sys.exit(main())
