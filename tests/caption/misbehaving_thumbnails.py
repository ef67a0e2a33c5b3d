"""Thumbnail makers that hang or crash, for caption-report's pool tests (module-level: workers are spawned)."""

import os
import time

from caption.report.thumbs import make_thumbnails


def hang_or_crash_on_name(job, max_side, quality):
    name = os.path.basename(job.path)
    if "hang" in name:
        time.sleep(3600)
    if "crash" in name:
        os._exit(11)  # like a segfault in native code: no exception, the process is gone
    return make_thumbnails(job, max_side, quality)
