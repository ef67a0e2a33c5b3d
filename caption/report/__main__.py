import sys

from caption.report.cli import main

sys.exit(main())
