"""Decoders that misbehave, for the worker-pool tests (module-level: workers are spawned)."""

import os
import time

from video_io.decode import decode_clip


def hang_on_name(path, spec):
    if "hang" in os.path.basename(path):
        time.sleep(3600)
    return decode_clip(path, spec)


def crash_on_name(path, spec):
    if "crash" in os.path.basename(path):
        os._exit(11)  # like a segfault in native code: no exception, the process is gone
    return decode_clip(path, spec)


def slow_on_name(path, spec):
    """A decoder that takes seconds without using the CPU (a clip on slow storage)."""
    if "slow" in os.path.basename(path):
        time.sleep(1.5)
    return decode_clip(path, spec)


def crash_in_third_segment(path, spec):
    """Dies (as native code does) on the segment that starts between 15 and 30 s of a long video."""
    if spec.window is not None and 15.0 <= spec.window[0] < 30.0:
        os._exit(11)
    return decode_clip(path, spec)
