"""Records and the files they were made from: which found clips changed since their records were made,
and each new record's `source` (video_io/identity.py says what a file's identity is).

A resumed job counts a record as done only for the file it was made from. Another file under a known
name (a camera's `C0001.MP4` of another day, a clip re-exported in place) whose records hold a caption is
refused before anything loads, in one line that says what differs and the ways forward; with
`recaption_changed=true` it is captioned anew and its old records move to `<stem>.superseded.jsonl`
(caption/output/records_file.py). One whose records are all errors (a broken clip replaced by a good one) is
captioned again without asking: no caption of another file could be taken for its own.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterable

from caption.outcome import InputGone
from caption.output.checks import OutputRefused
from caption.output.records_file import LEGACY_SOURCE, RecordStore, superseded_path
from vidcap_ko.record import Record
from video_io.identity import Identity, StrPath, compare, file_identity, with_folder
from video_io.store import StoreError, check_reachable, is_url


def changed_files(input_dir: Path | str, videos: Iterable[tuple[str, StrPath]], store: RecordStore) -> dict[str, str]:
    """{video: what differs} for the found clips whose records were made from another file."""
    changed: dict[str, str] = {}
    for key, path in videos:
        for recorded in store.sources.get(key, ()):
            why = compare(recorded, path, input_dir)
            if why is not None:
                changed[key] = why
                break
    return changed


def made_from_another_file(input_dir: Path | str, videos: Iterable[tuple[str, StrPath]]) -> Callable[[Record], bool]:
    """Whether a record (of a found clip) names another file than the one under its name now: what
    recaption_changed=true moves out with the job's own records (another settings' records beside them)."""
    paths = dict(videos)
    return lambda record: compare(record.get("source"), paths[record["video"]], input_dir) is not None


def legacy_videos(videos: Iterable[tuple[str, StrPath]], store: RecordStore) -> int:
    """Found clips whose records carry no `source` (written before records had one): done by name only."""
    return sum(LEGACY_SOURCE in store.sources.get(key, ()) for key, _ in videos)


def refuse_changed(output: Path, changed: dict[str, str]) -> None:
    """OutputRefused, in one line: the records of these clips were made from other files."""
    video, why = next(iter(changed.items()))
    more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
    raise OutputRefused(
        f"`output={output}` holds records of {len(changed)} clip(s) made from another file under the same name: "
        f"'{video}': {why}{more}; resuming would count them as captions of the files there now: choose another "
        f"output= (a folder of other clips with the same file names), add recaption_changed=true to caption them "
        f"again (their old records move to {superseded_path(output).name}), or overwrite=true to start afresh "
        f"(the file is kept, renamed to {output.stem}.<time>{output.suffix})")


class SourceIdentities:
    """Each record's `source`: the identity of the file its decoder read (video_io/identity.py OpenedFile,
    carried in the record from the decoder), with the folder it was found in. A record no decoder
    spoke for (the decoder died or hung on the clip) gets the file's identity now, worked out once per
    video (a long video's segments share it)."""

    def __init__(self, input_dir: Path | str, videos: Iterable[tuple[str, StrPath]]):
        self.input_dir, self.paths = input_dir, {key: path for key, path in videos}
        self._known: dict[str, Identity | None] = {}

    def of(self, record: Record) -> Identity | None:
        """`record`'s source, taken out of it (the caller puts it back, last, with its folder)."""
        read = record.pop("source", None)
        if read is not None:
            return with_folder(read, self.input_dir)
        video = record["video"]
        if video not in self._known:
            path = self.paths.get(video)
            self._known[video] = None if path is None else file_identity(path, self.input_dir)
        return self._known[video]


class InputFolder:
    """The folder being captioned, as it was listed: a clip that fails while the folder is gone, or while
    another folder stands at its path (a network mount that dropped leaves its empty mountpoint, on
    another device), stops the job (InputGone) instead of becoming an error record: every clip after it
    would fail for the same reason, and not one of them is broken."""

    def __init__(self, path: Path | str):
        self.path, self.unreachable = path, ""
        self.identity = self._identity()

    def _identity(self) -> tuple[int, int] | None:
        if is_url(self.path):  # a store: what matters is that it answers (with these credentials)
            try:
                check_reachable(str(self.path))
            except StoreError as exc:
                self.unreachable = str(exc)
                return None
            return (0, 0)
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def check(self, written: int) -> None:
        """InputGone, naming the folder and what became of it, where it is not the folder listed."""
        now = self._identity()
        if now == self.identity:
            return
        if is_url(self.path):
            raise InputGone(f"`input_dir={self.path}` went away while the job ran ({self.unreachable.split(': ', 1)[-1]}), so its "
                            f"clips cannot be read; stopped without error records for them. The {written} "
                            "record(s) written stay: run the same command again once the store answers, and the "
                            "job resumes")
        what = "it is gone" if now is None else "another folder stands at its path: a mount that dropped"
        raise InputGone(f"`input_dir={self.path}` went away while the job ran ({what}), so its clips cannot be "
                        f"read; stopped without error records for them. The {written} record(s) written stay: "
                        "run the same command again once the folder is back, and the job resumes")
