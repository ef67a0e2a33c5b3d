"""Videos in object storage: an `input_dir` such as `s3://bucket/prefix` is listed, and its objects are
identified and read in place, through fsspec (s3:// by s3fs, installed with vidcap-ko; gs://, az://,
... where their fsspec package is installed: gcsfs, adlfs). docs/object-storage.md says why this client.

Credentials and the endpoint are the client's own, the standard way (for S3: AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_ENDPOINT_URL, AWS_PROFILE, an instance role: botocore's
chain). None is ever passed through here, so none can reach a record, log, summary or page; a URL that
carries one (`s3://KEY:SECRET@bucket`) is refused.

Reading is by range requests: a decoder reads an object through a file whose blocks (BLOCK_BYTES) are
fetched as it asks for them, so a seek to a keyframe fetches what is decoded there, not the object.
Each object's identity is what the store says of it (size, ETag, last-modified and, in a versioned
bucket, the version id), listed once with the folder and asked again (a HEAD request) by the decoder
when it opens and when it has read the object: an object overwritten meanwhile is never captioned
under either version's identity.
"""

from __future__ import annotations

import atexit
import functools
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$")
BLOCK_BYTES = 1 << 20  # one range request's bytes: an H.264 GOP of 1080p footage is a few of them
CACHED_BLOCKS = 64  # per open object: at most 64 MiB held by a decoder
CONNECT_S, READ_S = 10, 60  # a store that takes no connection in CONNECT_S is unreachable, not slow
LOCAL_PROTOCOLS = ("file", "local")


class StoreError(Exception):
    """The store cannot be listed or read at all (unreachable, refused credentials, no such bucket); the
    message is one line naming the URL and the store's reason."""


def is_url(path: object) -> bool:
    """Whether `path` names an object-store location (`s3://...`) rather than a local file or folder."""
    if not isinstance(path, str):
        return False
    match = URL.match(path)
    return match is not None and match.group(1).lower() not in LOCAL_PROTOCOLS


def protocol_of(url: str) -> str:
    match = URL.match(url)
    assert match is not None, url
    return match.group(1).lower()


def check_url(url: str, key: str = "input_dir") -> str:
    """`url` without a trailing slash; StoreError for one that carries credentials, or whose protocol no
    installed fsspec package serves, saying what to do instead."""
    match = URL.match(url)
    if match is None:
        raise StoreError(f"`{key}={url}` is not a URL")
    protocol, rest = match.group(1).lower(), match.group(2)
    authority = rest.split("/", 1)[0]
    if "@" in authority:  # s3://KEY:SECRET@bucket: a secret on the command line, in shell history and logs
        shown = f"{protocol}://{authority.rsplit('@', 1)[1]}/{rest.split('/', 1)[1] if '/' in rest else ''}"
        raise StoreError(f"`{key}=` carries credentials in its URL; give {shown.rstrip('/')} and the credentials "
                         "the standard way (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, AWS_PROFILE or an "
                         "instance role: docs/object-storage.md)")
    if not authority:
        raise StoreError(f"`{key}={url}` names no bucket: give {protocol}://BUCKET/PREFIX")
    try:
        filesystem(protocol)
    except (ImportError, ValueError) as exc:
        raise StoreError(f"`{key}={url}`: no installed fsspec package reads {protocol}:// ({_one_line(exc)}); "
                         "s3:// is installed with vidcap-ko, gs:// needs gcsfs, az:// adlfs") from None
    return f"{protocol}://{rest.rstrip('/')}"


# where a client connects, never who it is: what a Ray job hands its actors on other nodes (caption/runners/
# ray.py), whose credentials are their own (an instance role, the node's environment)
WHERE_ENVIRONMENT = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION")
# what decides where a client connects and as whom: a process that changes them (a test, a notebook
# switching profiles) gets another client
CLIENT_ENVIRONMENT = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_ACCESS_KEY_ID",
                      "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION",
                      "AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE")


def filesystem(protocol: str):
    """The fsspec filesystem for `protocol`, one per process and client environment (its connections are
    reused). Listings are never cached: each listing and each HEAD asks the store, so an object
    overwritten while the job runs is seen as such."""
    return _filesystem(protocol, tuple(os.environ.get(name) for name in CLIENT_ENVIRONMENT))


@functools.lru_cache(maxsize=8)
def _filesystem(protocol: str, environment: tuple):
    import fsspec

    options: dict[str, Any] = {"use_listings_cache": False, "skip_instance_cache": True}
    if protocol in ("s3", "s3a"):
        options["config_kwargs"] = {"connect_timeout": CONNECT_S, "read_timeout": READ_S}
        if not (os.environ.get("AWS_MAX_ATTEMPTS") or os.environ.get("AWS_RETRY_MODE")):  # else the user's own
            # botocore's standard retry mode: throttling (503 SlowDown, 429) and transient errors tried again
            # with backoff, on top of s3fs's own tries (s3fs/core.py _error_wrapper)
            options["config_kwargs"]["retries"] = {"max_attempts": 5, "mode": "standard"}
    return fsspec.filesystem(protocol, **options)



def _fs(url: str):
    return filesystem(protocol_of(url))


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _store_words(exc: BaseException) -> str:
    """The store's error code and message (`AccessDenied: Access Denied`) where s3fs kept botocore's error
    as the cause (s3fs/errors.py translate_boto_error), else the exception's text. A HEAD's answer has no
    body, so a refused HEAD says only `Forbidden`."""
    error = getattr(exc.__cause__, "response", None)
    error = error.get("Error") if isinstance(error, dict) else None
    if isinstance(error, dict) and error.get("Code"):
        code, message = str(error["Code"]), str(error.get("Message") or "")
        return _one_line(Exception(f"{code}: {message}" if message and message != code else code))
    return _one_line(exc)


def store_reason(exc: BaseException) -> str:
    """The store's reason for a failed call, in words: s3fs turns S3's error codes into Python's
    (s3fs/errors.py): a missing key or bucket FileNotFoundError, AccessDenied PermissionError."""
    if isinstance(exc, FileNotFoundError):
        return f"not found ({_store_words(exc)})"
    if isinstance(exc, PermissionError):
        return f"access denied ({_store_words(exc)}): check the credentials and the bucket's policy"
    return f"{type(exc).__name__}: {_store_words(exc)}"


@dataclass(frozen=True)
class ObjectInfo:
    """What the store says of one object."""

    size: int
    etag: str | None
    modified: str | None  # UTC, as identity.py writes a file's modification time
    version_id: str | None = None

    @classmethod
    def of(cls, info: dict) -> "ObjectInfo":
        etag = info.get("ETag") or info.get("etag")
        modified = info.get("LastModified") or info.get("mtime") or info.get("updated")
        if isinstance(modified, datetime):
            modified = modified.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        return cls(int(info.get("size") or 0), etag.strip('"') if isinstance(etag, str) else None,
                   str(modified) if modified is not None else None, info.get("VersionId") or None)

    def identity(self) -> dict:
        """A record's `source` (the folder is added by the job): what identity.py's describe() reads."""
        identity: dict[str, Any] = {"size": self.size, "etag": self.etag, "modified": self.modified}
        if self.version_id:
            identity["version_id"] = self.version_id
        return identity


_LISTED: dict[str, ObjectInfo] = {}  # every object listed in this process: a resume compares without asking again


def list_objects(root: str, extensions: Iterable[str]) -> list[tuple[str, str]]:
    """(key, url) for every object under `root` whose name ends in one of `extensions`, sorted by key: the
    key is the object's path below root, as a folder's clips are keyed. Names in a hidden "folder" or
    starting with "." are skipped, as in a folder. StoreError where the store cannot be listed."""
    fs, suffixes = _fs(root), tuple(extensions)
    try:
        found = fs.find(root, detail=True, withdirs=False)
    except Exception as exc:  # unreachable, refused credentials, no such bucket: the store's own words
        raise StoreError(f"`input_dir={root}` cannot be listed: {store_reason(exc)}") from None
    prefix = fs._strip_protocol(root).rstrip("/") + "/"
    videos = []
    for name, info in found.items():
        if info.get("type", "file") != "file" or not name.startswith(prefix):
            continue
        key = name[len(prefix):]
        if any(part.startswith(".") for part in key.split("/")) or not key.lower().endswith(suffixes):
            continue
        url = f"{protocol_of(root)}://{name}"
        _LISTED[url] = ObjectInfo.of(info)
        videos.append((key, url))
    videos.sort(key=lambda item: item[0])
    return videos


def other_suffixes(root: str, most: int = 10_000) -> dict[str, int]:
    """Objects under root by extension ("" for none), as crawl.other_suffixes counts a folder's files."""
    counts: dict[str, int] = {}
    try:
        names = _fs(root).find(root, maxdepth=None, withdirs=False)
    except Exception:
        return counts
    for name in names[:most]:
        base = name.rsplit("/", 1)[-1]
        if base.startswith("."):
            continue
        suffix = "." + base.rsplit(".", 1)[1].lower() if "." in base else ""
        counts[suffix] = counts.get(suffix, 0) + 1
    return counts


def head(url: str) -> ObjectInfo:
    """What the store says of `url` now (a HEAD request); the store's exception where it cannot say. A HEAD's
    refusal has no body (403 says only "Forbidden"): a one-byte read then asks why (AccessDenied, ...)."""
    fs = _fs(url)
    try:
        return ObjectInfo.of(fs.info(url))
    except PermissionError as refused:
        try:
            fs.cat_file(url, start=0, end=1)
        except PermissionError as why:
            raise why  # its cause, botocore's error, holds the code (_store_words)
        raise refused from None


def listed(url: str) -> ObjectInfo:
    """What the listing said of `url`, or the store now where this process did not list it."""
    info = _LISTED.get(url)
    return info if info is not None else head(url)


def check_reachable(url: str) -> None:
    """StoreError where the store at `url` cannot be reached or refuses the credentials (one HEAD or a
    listing of at most one key: s3fs's info() of a prefix)."""
    fs = _fs(url)
    try:
        fs.info(url)
    except FileNotFoundError:
        return  # reachable: the prefix holds nothing now
    except PermissionError as exc:
        # a HEAD's 403 has no body, and a key may list a bucket it may not HEAD: a listing of one key decides,
        # and says why where it is refused (InvalidAccessKeyId, SignatureDoesNotMatch, AccessDenied)
        refusal = _listing_refusal(fs, url)
        if refusal is not None or not hasattr(fs, "call_s3"):
            raise StoreError(f"`input_dir={url}` cannot be reached: {store_reason(refusal or exc)}") from None
    except Exception as exc:
        raise StoreError(f"`input_dir={url}` cannot be reached: {store_reason(exc)}") from None


def _listing_refusal(fs, url: str) -> BaseException | None:
    """Why an S3 store refuses to list one key under `url` (its error has a code and message), or None."""
    if not hasattr(fs, "call_s3"):  # not S3: the HEAD's refusal stands
        return None
    bucket, prefix, _ = fs.split_path(url)
    try:
        fs.call_s3("list_objects_v2", Bucket=bucket, Prefix=prefix, MaxKeys=1)
    except Exception as exc:
        return exc
    return None


class CountingFile:
    """An object opened for reading, counting the bytes fetched from the store (range requests of
    BLOCK_BYTES, as the decoder reads): what a clip cost the store, for the record's
    decode stats and `caption-bench store`."""

    def __init__(self, url: str, info: ObjectInfo):
        self.url = url
        # the blocks fetched stay (up to CACHED_BLOCKS: bounded memory), so a decoder's second pass over the
        # same part of the object, and the header read by each pass, are not fetched again. The size is the
        # caller's HEAD's: given, fsspec asks the store for it no more (fsspec/spec.py AbstractBufferedFile)
        self.file = _fs(url).open(url, "rb", block_size=BLOCK_BYTES, cache_type="blockcache",
                                  cache_options={"maxblocks": CACHED_BLOCKS}, size=info.size)
        if info.etag and hasattr(self.file, "read_kw"):
            # each range request names the version HEAD saw (If-Match): an object overwritten while it is read
            # is answered 412 and s3fs raises FileExpired, never another version's bytes. s3fs sets this
            # itself only when it takes the HEAD (s3fs/core.py S3File.__init__)
            etag = f'"{info.etag}"'
            self.file.read_kw = {**self.file.read_kw, "IfMatch": etag}
            self.file.details = {"name": self.file.path, "size": info.size, "ETag": etag}
        self.fetched = 0
        self.overwritten = False  # a range request was refused: the object is not the version HEAD saw
        fetch = self.file.cache.fetcher  # what the cache calls for each range: counted as it comes back
        expired: tuple[type[BaseException], ...] = ()
        if "IfMatch" in getattr(self.file, "read_kw", {}):
            from s3fs.utils import FileExpired

            expired = (FileExpired,)

        def counted(start: int, end: int) -> bytes:
            try:
                data = fetch(start, end)
            except expired:
                self.overwritten = True
                raise
            self.fetched += len(data)
            return data

        self.file.cache.fetcher = counted

    def rewound(self):
        """The file, at its start: what each decoder pass (av.open) reads from."""
        self.file.seek(0)
        return self.file

    def pread(self, size: int, offset: int) -> bytes:
        """`size` bytes at `offset`, the file left where it was (a decoder may be reading it meanwhile)."""
        where = self.file.tell()
        try:
            self.file.seek(offset)
            return self.file.read(size)
        finally:
            self.file.seek(where)

    def close(self) -> None:
        self.file.close()


_COPIES: dict[tuple[str, str | None], Path] = {}
COPY_TRIES = 3


def fetched_copy(url: str) -> Path | None:
    """A small object (a references.jsonl beside the clips, a list of videos) copied into a folder of this
    process's own, removed when it exits; None where the store holds no such object. Fetched again only
    when its ETag changed (a list edited between two calls of the Python API is read anew)."""
    for attempt in range(COPY_TRIES):  # a body cut off halfway is not tried again by the client itself
        try:
            version = (url, head(url).etag)
            if version not in _COPIES:
                folder = Path(tempfile.mkdtemp(prefix="vidcap-store-"))
                atexit.register(shutil.rmtree, folder, ignore_errors=True)
                local = folder / url.rsplit("/", 1)[-1]
                _fs(url).get_file(url, str(local))
                _COPIES[version] = local
            return _COPIES[version]
        except FileNotFoundError:
            return None
        except Exception as exc:
            if attempt == COPY_TRIES - 1:
                raise StoreError(f"{url} cannot be read: {store_reason(exc)}") from None
    return None


def clip_path(input_dir: Path | str, video: str) -> Path | str:
    """Where the clip keyed `video` is: a file in the folder, or an object under the URL."""
    return f"{input_dir}/{video}" if is_url(input_dir) else Path(input_dir) / video


def _answers(ask, url: str) -> bool:
    try:
        ask(url)
    except Exception:
        return False
    return True


def exists(path: Path | str) -> bool:
    """A file that is a regular file, or an object the store holds (asked now)."""
    return _answers(head, str(path)) if is_url(path) else Path(path).is_file()


def input_there(input_dir: Path | str) -> bool:
    """The folder exists, or the store answers for the URL."""
    return _answers(check_reachable, str(input_dir)) if is_url(input_dir) else Path(input_dir).is_dir()


def local_file(input_dir: Path | str, name: str) -> Path | None:
    """A small file beside the clips (references.jsonl), as a local path: the folder's own, or the store's
    copied (fetched_copy); None where there is none."""
    if is_url(input_dir):
        return fetched_copy(f"{input_dir}/{name}")
    path = Path(input_dir) / name
    return path if path.is_file() else None
