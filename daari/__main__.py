"""`python -m daari` is the `daari` command."""

import sys

from daari.cli import main

sys.exit(main())
