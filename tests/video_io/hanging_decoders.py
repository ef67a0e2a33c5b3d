"""Decoders that misbehave, for the worker-pool tests (module-level: they are pickled to the workers)."""

import json
import os
import sys
import time

from video_io.decode import DecodeError, decode_clip


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


def report_surroundings(path, spec):
    """Decodes nothing: its error says what the decoder process sees (an environment variable, its cores,
    whether PyAV was imported before its first clip, its parent)."""
    raise DecodeError(json.dumps({"mark": os.environ.get("VIDCAP_TEST_MARK"), "cores": sorted(os.sched_getaffinity(0)),
                                  "av_preloaded": "av" in sys.modules, "parent": os.getppid(), "pid": os.getpid()}))
