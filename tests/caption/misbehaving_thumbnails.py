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


def note_sigterm_then_answer(job, max_side, quality):
    """make_thumbnails in a worker that, like one under coverage.py's `sigterm = true`, handles SIGTERM itself:
    its handler leaves a file named by the worker's pid in `sigterm/` beside the clip, then ends it."""
    import signal

    def noted(signum, frame):
        folder = os.path.join(os.path.dirname(job.path), "sigterm")
        os.makedirs(folder, exist_ok=True)
        open(os.path.join(folder, str(os.getpid())), "w").close()
        os._exit(0)

    signal.signal(signal.SIGTERM, noted)
    return make_thumbnails(job, max_side, quality)
