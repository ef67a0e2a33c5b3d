"""Videos in object storage (video_io/store.py) against a real S3 API on loopback (moto's server:
tests/support/s3_server.py): listed as a folder is crawled, decoded from the object to the same frames as
from the file, identified by what the store says (an overwritten object is told apart, even halfway through its reading),
refused in the store's words where the store refuses (a forbidden object, an unknown key), a stalled answer
asked again, and credentials kept out of URLs."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.s3_server import SECRET, fault_proxy, folder_files, free_port, guarded_s3_server
from tests.video_io.clipmakers import write_clip
from tests.video_io.real_footage import sample_clips
from video_io import decode as decode_module
from video_io.crawl import VIDEO_EXTENSIONS, crawl_videos
from video_io.decode import DecodeSpec, decode_clip
from video_io.decoder_process import decode_path
from video_io.identity import OpenedFile, compare
from video_io.sampling import SamplingSpec
from video_io.source import DecodeError, object_checked_by_caller, open_source
from video_io.store import StoreError, check_reachable, check_url, head, list_objects

EIGHT = DecodeSpec(sampling=SamplingSpec(num_frames=8))


@pytest.fixture
def store_env(s3, monkeypatch):
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    return s3


@pytest.fixture
def tree(tmp_path):
    """A folder as teams keep one: clips in subfolders, a hidden folder, a hidden file, a non-video."""
    root = tmp_path / "tree"
    for rel in ("a/one.mp4", "a/b/two.MOV", "three.mkv", ".cache/four.mp4", "a/.five.mp4"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        write_clip(root / rel, 6)
    (root / "notes.txt").write_text("not a video")
    return root


def test_a_prefix_is_listed_as_its_folder_is_crawled(store_env, tree):
    bucket = store_env.bucket(folder_files(tree, prefix="day1/"))
    store_env.put(bucket, "day1-other/x.mp4", b"a sibling prefix: not under day1/")
    listed = list_objects(f"s3://{bucket}/day1", VIDEO_EXTENSIONS)
    assert [key for key, _ in listed] == [key for key, _ in crawl_videos(tree)] == ["a/b/two.MOV", "a/one.mp4",
                                                                                   "three.mkv"]
    assert [url for _, url in listed] == [f"s3://{bucket}/day1/{key}" for key, _ in listed]
    assert crawl_videos(f"s3://{bucket}/day1/") == listed  # a trailing slash lists the same


def test_an_object_decodes_to_the_files_frames_and_says_what_it_fetched(store_env, tmp_path):
    real = sample_clips() / "bikes.mp4"
    bucket = store_env.bucket({"clips/bikes.mp4": real})
    local, remote = decode_clip(str(real), EIGHT), decode_clip(f"s3://{bucket}/clips/bikes.mp4", EIGHT)
    assert remote.indices == local.indices and remote.times == local.times
    assert np.array_equal(remote.frames, local.frames)
    assert local.fetched_bytes is None and 0 < remote.fetched_bytes <= 2 * real.stat().st_size


def test_eight_sparse_frames_fetch_a_part_of_a_long_object(store_env, tmp_path, monkeypatch):
    """The timestamps come from the MP4's index (no demuxing pass over every packet) and each keyframe is
    reached by a seek: the blocks fetched are those decoded. Blocks of 64 KiB here, so that a 6 MB clip
    spans many (the job's are 1 MiB: video_io/store.py BLOCK_BYTES)."""
    monkeypatch.setattr("video_io.store.BLOCK_BYTES", 64 * 1024)
    base = np.random.default_rng(0).integers(0, 255, (272, 480, 3), dtype=np.uint8)
    path = write_clip(tmp_path / "long.mp4", 600, 480, 272, frame_fn=lambda i: np.roll(base, i * 3, axis=1),
                      options={"g": "60"})
    bucket = store_env.bucket({"long.mp4": path})
    spec = DecodeSpec(sampling=SamplingSpec(num_frames=8), seek="keyframe")
    remote, local = decode_clip(f"s3://{bucket}/long.mp4", spec), decode_clip(str(path), spec)
    assert remote.seek == "keyframe" and remote.indices == local.indices and np.array_equal(remote.frames, local.frames)
    assert remote.fetched_bytes < 0.4 * path.stat().st_size, (remote.fetched_bytes, path.stat().st_size)


@pytest.mark.parametrize("codec, times", [
    ("libx264", None),  # B-frames: presentation order is not decode order
    ("libx265", None),  # x265's open GOPs: pictures decoded after a keyframe are shown before it
    ("libx264", [round(0.013 * i * i, 3) for i in range(40)]),  # variable frame rate
    ("mpeg4", None),
])
def test_the_mp4_index_gives_the_packets_timestamps_without_demuxing_them(tmp_path, codec, times):
    import av

    from video_io.pyav_frames import indexed_timeline, packet_index

    n = len(times) if times else 80
    path = write_clip(tmp_path / "clip.mp4", n, codec=codec, times=times, options={"g": "12"}
                      if codec != "libx265" else {"x265-params": "keyint=12:bframes=3:log-level=none"})
    data = path.read_bytes()
    with av.open(str(path)) as demuxed, av.open(str(path)) as indexed:
        truth = packet_index(demuxed, demuxed.streams.video[0])
        got = indexed_timeline(indexed, indexed.streams.video[0], lambda size, at: data[at:at + size], len(data))
    assert len(truth[1]) > 1 and got == truth


def test_the_store_identifies_an_object_and_an_overwrite_is_told_apart(store_env, tmp_path):
    first, second = write_clip(tmp_path / "a.mp4", 8), write_clip(tmp_path / "b.mp4", 9)
    bucket = store_env.bucket({"c/clip.mp4": first})
    url = f"s3://{bucket}/c/clip.mp4"
    opened = OpenedFile.open(url)
    assert opened.identity["size"] == first.stat().st_size and opened.identity["etag"]
    assert opened.changed(url) is None
    recorded = {"input_dir": f"s3://{bucket}/c", **opened.identity}
    assert compare(recorded, url, f"s3://{bucket}/c") is None
    store_env.put(bucket, "c/clip.mp4", second)
    changed = opened.changed(url)
    assert changed.startswith("it was ") and "overwritten" in changed and opened.identity["etag"] in changed
    crawl_videos(f"s3://{bucket}/c")  # the listing now holds the new version
    assert "it is now" in compare(recorded, url, f"s3://{bucket}/c")


def test_what_the_store_refuses_is_said_in_words(store_env, tmp_path):
    bucket = store_env.bucket({"c/empty.mp4": b"", "c/notes.mp4": b"shot list: 3 takes of the harbour\n"})
    for key, words in (("c/missing.mp4", "object not found"), ("c/empty.mp4", r"empty object \(0 bytes\)"),
                       ("c/notes.mp4", "not a video: the file holds text")):
        with pytest.raises(DecodeError, match=words):
            decode_clip(f"s3://{bucket}/{key}", EIGHT)
    with pytest.raises(StoreError, match="cannot be listed: not found"):
        list_objects("s3://no-such-bucket-here/clips", (".mp4",))


def test_an_unreachable_store_or_a_url_with_credentials_is_one_line(store_env, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # botocore's own setting, taken as the user's
    with pytest.raises(StoreError) as unreachable:
        list_objects("s3://footage/clips", (".mp4",))
    assert "cannot be listed" in str(unreachable.value) and "\n" not in str(unreachable.value)
    with pytest.raises(StoreError) as carried:
        check_url(f"s3://AKIA:{SECRET}@footage/clips")
    assert SECRET not in str(carried.value) and "s3://footage/clips" in str(carried.value)
    with pytest.raises(StoreError, match="no installed fsspec package reads nosuchproto://"):
        check_url("nosuchproto://footage/clips")


def _requests(server, bucket: str) -> list[str]:
    """The requests the store answered for `bucket`, as moto's server logged them ("HEAD /bucket/key")."""
    lines = server.log.read_text(errors="replace").splitlines()
    return [" ".join(line.split('"')[1].split()[:2]) for line in lines if f" /{bucket}" in line and '"' in line]


def test_a_clip_costs_the_store_two_heads_and_the_ranges_it_decodes(store_env, tmp_path):
    """The decoder's HEAD when it takes the object's identity is the one it opens the object by, and one
    HEAD once the frames are out asks whether the object changed (video_io/identity.py): no other."""
    bucket = store_env.bucket({"a.mp4": write_clip(tmp_path / "a.mp4", 30)})
    results = list(decode_path(f"s3://{bucket}/a.mp4", EIGHT))
    assert len(results) == 1 and results[0].ok, results[0].error
    asked = _requests(store_env, bucket)
    assert [r for r in asked if r.startswith("HEAD")] == [f"HEAD /{bucket}/a.mp4"] * 2, asked
    assert [r for r in asked if r.startswith("GET")] == [f"GET /{bucket}/a.mp4"], asked  # one range: a small clip


def test_an_object_overwritten_while_it_is_read_gives_no_frames_of_either_version(store_env, tmp_path,
                                                                                  monkeypatch):
    """Each range request names the version the decoder opened (If-Match): overwritten after the first
    range, the store refuses the next, and the decoder says the object changed, not that it is damaged."""
    monkeypatch.setattr("video_io.store.BLOCK_BYTES", 16 * 1024)  # a clip of many ranges
    base = np.random.default_rng(1).integers(0, 255, (144, 256, 3), dtype=np.uint8)
    first = write_clip(tmp_path / "first.mp4", 90, 256, 144, frame_fn=lambda i: np.roll(base, i, axis=0))
    second = write_clip(tmp_path / "second.mp4", 90, 256, 144, frame_fn=lambda i: np.roll(base, -i, axis=1))
    assert first.stat().st_size > 8 * 16 * 1024
    bucket = store_env.bucket({"c.mp4": first})

    def opened_then_overwritten(path):
        source = open_source(path)  # its identity taken and its first range read
        store_env.put(bucket, "c.mp4", second)
        return source

    monkeypatch.setattr(decode_module, "open_source", opened_then_overwritten)
    url = f"s3://{bucket}/c.mp4"
    with object_checked_by_caller(url, head(url)), pytest.raises(DecodeError) as changed:
        decode_clip(url, EIGHT)  # as decode_path calls it: no HEAD after decoding, the ranges alone guard it
    assert str(changed.value).startswith("the object changed while it was being decoded (overwritten)")
    monkeypatch.setattr(decode_module, "open_source", open_source)
    again = decode_clip(f"s3://{bucket}/c.mp4", EIGHT)  # the next run decodes the new version whole
    assert np.array_equal(again.frames, decode_clip(str(second), EIGHT).frames)


def test_a_stalled_answer_is_timed_out_and_asked_again(store_env, tmp_path, monkeypatch):
    """A store that never answers one range request (tests/support/s3_faults.py `stall`): the client's read
    timeout gives up on it and botocore asks again; the frames are the file's. The timeout is the job's
    60 s (video_io/store.py READ_S), one second here."""
    monkeypatch.setattr("video_io.store.READ_S", 1)
    monkeypatch.setattr("video_io.store.BLOCK_BYTES", 16 * 1024)
    path = write_clip(tmp_path / "a.mp4", 90, 256, 144)
    bucket = store_env.bucket({"a.mp4": path})
    port = free_port()
    proxy = fault_proxy(port, store_env.port, "2:stall,4:stall")  # the first range read, and a later one
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
        remote = decode_clip(f"s3://{bucket}/a.mp4", EIGHT)
    finally:
        proxy.kill()
    stalled = proxy.communicate()[0].split("\n")
    assert [line.split()[1] for line in stalled if line] == ["stall", "stall"], stalled
    assert np.array_equal(remote.frames, decode_clip(str(path), EIGHT).frames)


@pytest.fixture
def guarded_store(tmp_path):
    with guarded_s3_server(tmp_path, {"open/a.mp4": write_clip(tmp_path / "a.mp4", 20),
                                      "secret/b.mp4": write_clip(tmp_path / "b.mp4", 20)}) as guarded:
        yield guarded


def test_a_forbidden_object_and_refused_credentials_are_said_in_the_stores_words(guarded_store, monkeypatch):
    server, bucket, reader = guarded_store
    for name, value in reader.items():
        monkeypatch.setenv(name, value)
    assert [key for key, _ in list_objects(f"s3://{bucket}", (".mp4",))] == ["open/a.mp4", "secret/b.mp4"]
    assert decode_clip(f"s3://{bucket}/open/a.mp4", EIGHT).frames.shape[0] == 8
    with pytest.raises(DecodeError) as forbidden:  # HEAD says only 403; the store's code comes from a read
        decode_clip(f"s3://{bucket}/secret/b.mp4", EIGHT)
    assert str(forbidden.value).startswith("the store refused the object: access denied (AccessDenied")
    for name, value, code in (("AWS_ACCESS_KEY_ID", "AKIANOSUCHKEY0000000", "InvalidAccessKeyId"),
                              ("AWS_SECRET_ACCESS_KEY", "not-the-secret", "SignatureDoesNotMatch")):
        monkeypatch.setenv(name, value)
        with pytest.raises(StoreError) as refused:
            check_reachable(f"s3://{bucket}")
        assert f"cannot be reached: access denied ({code}" in str(refused.value), refused.value
        with pytest.raises(StoreError, match=f"cannot be listed: access denied \\({code}"):
            list_objects(f"s3://{bucket}", (".mp4",))
        monkeypatch.setenv(name, reader[name])
