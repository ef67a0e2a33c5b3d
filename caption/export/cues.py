"""Subtitle cues from caption records, and the WebVTT and SRT text of a video's cues.

When a cue shows:
- a record of a segment (`start_s` and `end_s`, seconds in the source video) from `start_s` to `end_s`;
- a record of the whole clip (today's records: no segment) from 0 to the clip's duration, taken from
  the first of: the record's own `duration_s` (or `duration`); the video file's duration as PyAV reads
  it from the header, when the file is found in the input folder; the time of the last frame the model
  was given (`frame_times`, seconds from the first frame). With none of these, it lasts MIN_CUE_S.

Times are rounded to milliseconds. Cues are sorted by start; a cue that would end at or before its
start lasts MIN_CUE_S, and a cue that runs into the next one (a later start) ends where the next
begins, so a player shows one caption at a time. Two cues with the same start both stay (a player
shows them together). Blank lines inside a caption (a cue's end in both formats) are dropped, as is a
caption that is empty; in WebVTT `&`, `<` and `>` are written as the character references the format
asks for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from video_io.source import DecodeError, open_source
from video_io.store import clip_path

MIN_CUE_S = 0.5
DURATION_FIELDS = ("duration_s", "duration")


@dataclass(frozen=True)
class Cue:
    start_ms: int
    end_ms: int
    text: str
    line: int = 0  # the record's line in the records file


def _seconds(value) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return float(value)
    return None


def probe_duration(path: Path | str) -> float | None:
    """The video's duration in seconds from its container header (PyAV), or None when the file is
    missing or unreadable."""
    import av

    try:
        with open_source(str(path)) as source, av.open(source.uri, metadata_errors="replace") as container:
            stream = container.streams.video[0] if container.streams.video else None
            if stream is not None and stream.duration and stream.time_base:
                return _seconds(float(stream.duration * stream.time_base))
            return _seconds(container.duration / 1e6) if container.duration else None
    except DecodeError:
        return None
    except Exception:  # noqa: BLE001 - PyAV's errors for a damaged file: fall back to the frame times
        return None


@dataclass
class ClipDurations:
    """Where whole-clip cues end (the module docstring's rule), counting which source each clip used."""

    input_dir: Path | str | None  # a folder or an object-store URL (video_io/store.py)
    used: dict[str, int] = field(default_factory=dict)  # source -> clips
    _probed: dict[str, float | None] = field(default_factory=dict)

    def end_s(self, record: dict) -> float:
        for name in DURATION_FIELDS:
            if _seconds(record.get(name)):
                return self._count("the record", _seconds(record[name]))
        video = record["video"]
        if self.input_dir is not None and video not in self._probed:
            self._probed[video] = probe_duration(clip_path(self.input_dir, video))
        if self._probed.get(video):
            return self._count("the video file", self._probed[video])
        times = [t for t in (record.get("frame_times") or []) if _seconds(t) is not None]
        if times and max(times) > 0:
            return self._count("the last sampled frame", max(times))
        return self._count(f"none found ({MIN_CUE_S} s)", MIN_CUE_S)

    def _count(self, source: str, seconds: float) -> float:
        self.used[source] = self.used.get(source, 0) + 1
        return seconds


def _ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))


def cue_of(record: dict, durations: ClipDurations) -> Cue | None:
    """The cue of one `ok` record, or None when its caption is empty."""
    text = "\n".join(line.strip() for line in str(record.get("caption") or "").splitlines() if line.strip())
    if not text:
        return None
    start = _seconds(record.get("start_s"))
    if start is None:
        start, end = 0.0, durations.end_s(record)
    else:
        end = _seconds(record.get("end_s"))
        end = start if end is None else end
    return Cue(_ms(start), _ms(end), text, record.get("_line", 0))


def arrange(cues: list[Cue]) -> list[Cue]:
    """Sorted by start; no zero-length cue, none running into the next (the module docstring)."""
    cues = sorted(cues, key=lambda c: (c.start_ms, c.end_ms, c.line))
    out = []
    for k, cue in enumerate(cues):
        end = cue.end_ms if cue.end_ms > cue.start_ms else cue.start_ms + _ms(MIN_CUE_S)
        later = next((c.start_ms for c in cues[k + 1:] if c.start_ms > cue.start_ms), None)
        if later is not None and end > later:
            end = later
        out.append(Cue(cue.start_ms, end, cue.text, cue.line))
    return out


def timestamp(ms: int, decimal: str) -> str:
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}{decimal}{millis:03d}"


def webvtt(cues: list[Cue]) -> str:
    """A WebVTT file: the header, then blank-line separated cues."""
    def escaped(text: str) -> str:
        return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

    blocks = [f"{timestamp(c.start_ms, '.')} --> {timestamp(c.end_ms, '.')}\n{escaped(c.text)}" for c in cues]
    return "\n\n".join(["WEBVTT", *blocks]) + "\n"


def subrip(cues: list[Cue]) -> str:
    """An SRT file: 1-based cue numbers, `HH:MM:SS,mmm` times, blank-line separated cues."""
    blocks = [f"{n}\n{timestamp(c.start_ms, ',')} --> {timestamp(c.end_ms, ',')}\n{c.text.replace('-->', '->')}"
              for n, c in enumerate(cues, 1)]
    return "\n\n".join(blocks) + "\n"


FORMATS = {"vtt": webvtt, "srt": subrip}
