"""`python -m caption.bench ...` is `caption-bench ...` (where the console script is not installed)."""

import sys

from caption.bench.cli import main

sys.exit(main())
