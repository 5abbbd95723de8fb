"""``python -m engine``: the command line of CONTRACT.md."""

import sys

from engine.cli.main import main

sys.exit(main())
