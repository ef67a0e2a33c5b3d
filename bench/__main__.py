"""`python -m bench ...` is `caption-bench ...` (where the console script is not installed)."""

import sys

from bench.cli import main

sys.exit(main())
