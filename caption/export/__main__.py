import sys

from caption.export.cli import main

sys.exit(main())
