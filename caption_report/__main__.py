import sys

from caption_report.cli import main

sys.exit(main())
