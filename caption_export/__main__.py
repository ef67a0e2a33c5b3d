import sys

from caption_export.cli import main

sys.exit(main())
