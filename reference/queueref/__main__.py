"""`python -m queueref` is the `queueref` command."""

import sys

from queueref.cli import main

sys.exit(main())
