"""The job on videos in object storage (input_dir=s3://bucket/prefix), against a real S3 API on loopback
(moto's server: tests/support/s3_server.py): the same greedy captions as from the same files on disk (the
command, and the Python API), records that name the object's version, the review page and subtitles made
from the stored clips, an overwritten object refused or captioned anew, a store that cannot be reached
stopped in one line before the model loads, and the secret key in no file the job writes."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from caption.output.checks import OutputRefused
from tests.caption.in_process import run_caption, run_command
from tests.support.s3_server import SECRET, fault_proxy, folder_files, free_port, guarded_s3_server
from vidcap_ko.exit_status import EXIT_INPUT_GONE, EXIT_OK, EXIT_USAGE

pytestmark = pytest.mark.slow  # jobs that generate


def _env(s3, **extra) -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", **s3.env(), **extra}


def _caption(tmp_path: Path, env: dict, *overrides: str, run: str = "run"):
    return run_caption([*overrides, "progress=false", f"hydra.run.dir={tmp_path / run}"], env=env, cwd=tmp_path)


def _run_job(compose_config, engine, *overrides) -> dict:
    """The job in this process on the tests' shared engine (the command's lines and statuses are checked
    through the command itself)."""
    from caption.job import run_job

    return run_job(compose_config([*overrides, "progress=false", "video.workers=1"]), engine=engine)


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def bucket(s3, synth_dir):
    """caption-synth's clips and their references.jsonl under clips/ in a bucket of the test's own."""
    return s3.bucket(folder_files(synth_dir, prefix="clips/"))


@pytest.fixture
def store_env(s3, monkeypatch):
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    return s3


def test_the_command_gives_the_folders_greedy_captions_from_the_store_and_pages_and_subtitles_follow(
        s3, bucket, synth_dir, tmp_path, compose_config, vllm_engine):
    disk = _run_job(compose_config, vllm_engine, f"input_dir={synth_dir}", f"output={tmp_path / 'disk.jsonl'}")
    assert disk["exit_status"] == EXIT_OK
    url, out = f"s3://{bucket}/clips", tmp_path / "store.jsonl"
    done = _caption(tmp_path, _env(s3), f"input_dir={url}", f"output={out}", run="store")
    assert done.returncode == EXIT_OK, done.stderr[-3000:]
    store = _records(out)
    assert sorted((r["video"], r["caption"]) for r in store) == \
        sorted((r["video"], r["caption"]) for r in _records(tmp_path / "disk.jsonl"))
    assert len(store) == len(list(synth_dir.glob("*.mp4")))
    sizes = {p.name: p.stat().st_size for p in synth_dir.glob("*.mp4")}
    for record in store:
        source = record["source"]
        assert source["input_dir"] == url and source["size"] == sizes[record["video"]] and source["etag"]
        assert 0 < record["fetched_bytes"] <= 2 * source["size"]
    # scored as the folder is: against the references.jsonl beside the clips in the store
    summary = json.loads(Path(f"{out}.summary.json").read_text(encoding="utf-8"))
    assert summary["meteor"] == disk["meteor"] is not None and summary["input_dir"] == url
    # resumed: every object is done, nothing is captioned again
    done = _caption(tmp_path, _env(s3), f"input_dir={url}", f"output={out}", run="again")
    assert done.returncode == EXIT_OK and "(0 to caption, 6 already done)" in done.stdout, done.stderr[-3000:]
    assert len(_records(out)) == len(store)

    # the review page takes its thumbnails from the stored clips, the subtitles their durations
    page = tmp_path / "page.html"
    report = run_command("caption-report", [out, "--out", page, "--workers", "0"], env=_env(s3))
    assert report.returncode == EXIT_OK, report.stderr
    data = json.loads(re.search(r'<script id="report-data" type="application/json">(.*?)</script>',
                                page.read_text(encoding="utf-8"), re.S).group(1))
    assert [len(clip.get("t", [])) for clip in data["clips"]] == [8] * len(store), data.get("placeholders")
    export = run_command("caption-export", [out, "--format", "vtt", "--out", tmp_path / "vtt"], env=_env(s3))
    assert export.returncode == EXIT_OK and "from the video file" in export.stdout + export.stderr, export.stderr
    assert len(list((tmp_path / "vtt").glob("*.vtt"))) == len(store)

    # the secret key is in no file written: records, summaries, run folders and their logs, page, subtitles
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(written) > 10 and not [p for p in written if SECRET.encode() in p.read_bytes()]


def test_an_overwritten_object_is_refused_then_captioned_anew(store_env, bucket, synth_dir, tmp_path, compose_config,
                                                             vllm_engine):
    from caption.api import Captioner

    url, out = f"s3://{bucket}/clips", tmp_path / "captions.jsonl"
    with Captioner(overrides=["references=null"]) as captioner:  # the Python API lists the prefix as the command
        first = {r["video"]: r for r in captioner.caption(url, output=out)}
    assert len(first) == 6 and all(r["status"] == "ok" and r["source"]["etag"] for r in first.values())
    disk = _run_job(compose_config, vllm_engine, f"input_dir={synth_dir}", f"output={tmp_path / 'disk.jsonl'}",
                    "references=null")
    assert disk["exit_status"] == EXIT_OK  # the API's greedy captions from the store are the folder's
    assert {r["video"]: r["caption"] for r in _records(tmp_path / "disk.jsonl")} == \
        {video: r["caption"] for video, r in first.items()}
    store_env.put(bucket, "clips/clip_00001.mp4", synth_dir / "clip_00002.mp4")  # re-exported in place
    with pytest.raises(OutputRefused) as refused:
        _run_job(compose_config, vllm_engine, f"input_dir={url}", f"output={out}", "references=null")
    line = str(refused.value)
    assert "'clip_00001.mp4'" in line and first["clip_00001.mp4"]["source"]["etag"] in line
    assert "recaption_changed=true" in line and "\n" not in line
    again = _run_job(compose_config, vllm_engine, f"input_dir={url}", f"output={out}", "references=null",
                     "recaption_changed=true")
    assert again["exit_status"] == EXIT_OK and again["videos_recaptioned_changed"] == 1
    now = {r["video"]: r for r in _records(out)}
    assert now["clip_00001.mp4"]["source"]["etag"] != first["clip_00001.mp4"]["source"]["etag"]
    assert now["clip_00001.mp4"]["source"]["size"] == (synth_dir / "clip_00002.mp4").stat().st_size
    assert now["clip_00001.mp4"]["caption"] == first["clip_00002.mp4"]["caption"]  # the new bytes' caption
    assert now["clip_00000.mp4"] == first["clip_00000.mp4"]


def test_a_store_that_cannot_be_reached_or_a_url_with_a_key_is_one_line_before_anything_loads(s3, bucket, tmp_path):
    unreachable = _env(s3, AWS_ENDPOINT_URL=f"http://127.0.0.1:{free_port()}", AWS_MAX_ATTEMPTS="1")
    done = _caption(tmp_path, unreachable, f"input_dir=s3://{bucket}/clips", f"output={tmp_path / 'x.jsonl'}")
    lines = [line for line in done.stderr.splitlines() if line.startswith("caption:")]
    assert done.returncode == EXIT_INPUT_GONE and len(lines) == 1, done.stderr[-3000:]
    assert "input unreachable" in lines[0] and "cannot be reached" in lines[0] and "Traceback" not in done.stderr
    assert not (tmp_path / "x.jsonl").exists() and "engine start" not in done.stdout
    done = _caption(tmp_path, _env(s3), f"input_dir=s3://AKIA:{SECRET}@{bucket}/clips",
                    f"output={tmp_path / 'y.jsonl'}", run="keyed")
    lines = [line for line in done.stderr.splitlines() if line.startswith("caption:")]
    assert done.returncode == EXIT_USAGE and len(lines) == 1 and "carries credentials" in lines[0], done.stderr
    assert SECRET not in done.stderr + done.stdout


def test_a_forbidden_object_is_an_error_record_and_refused_credentials_stop_the_job_before_it_loads(
        synth_dir, tmp_path, compose_config, vllm_engine, monkeypatch):
    """A store that checks signatures and policies (moto's IAM): the object the key may not read becomes an
    error record with the store's reason while the others are captioned; a key the store does not know
    stops the job in one line, before any model loads, with the input's exit status."""
    files = {**folder_files(synth_dir, prefix="clips/"), "secret/clips/clip_00000.mp4": synth_dir / "clip_00000.mp4"}
    with guarded_s3_server(tmp_path, files) as (_, bucket, reader):
        for name, value in reader.items():
            monkeypatch.setenv(name, value)
        out = tmp_path / "captions.jsonl"
        summary = _run_job(compose_config, vllm_engine, f"input_dir=s3://{bucket}", f"output={out}",
                           "references=null")
        assert summary["exit_status"] != EXIT_OK and summary["videos_failed"] == 1, summary
        records = {r["video"]: r for r in _records(out)}
        assert sorted(records) == ["clips/" + p.name for p in sorted(synth_dir.glob("*.mp4"))] + \
            ["secret/clips/clip_00000.mp4"]
        refused = records.pop("secret/clips/clip_00000.mp4")
        assert refused["status"] == "error" and "access denied (AccessDenied" in refused["error"], refused
        assert all(r["status"] == "ok" for r in records.values())
        unknown = {**os.environ, "HF_HUB_OFFLINE": "1", **reader, "AWS_ACCESS_KEY_ID": "AKIANOSUCHKEY0000000"}
        done = _caption(tmp_path, unknown, f"input_dir=s3://{bucket}", f"output={tmp_path / 'x.jsonl'}",
                        run="unknown")
    lines = [line for line in done.stderr.splitlines() if line.startswith("caption:")]
    assert done.returncode == EXIT_INPUT_GONE and len(lines) == 1, done.stderr[-3000:]
    assert "input unreachable" in lines[0] and "InvalidAccessKeyId" in lines[0] and "Traceback" not in done.stderr
    assert not (tmp_path / "x.jsonl").exists() and "engine start" not in done.stdout


def test_throttling_dropped_connections_and_cut_answers_are_tried_again_and_nothing_is_lost_or_doubled(
        s3, bucket, tmp_path, compose_config, vllm_engine, monkeypatch):
    """A proxy in front of the store answers some requests 503 SlowDown, closes the connection on others
    and cuts others' answers halfway (tests/support/s3_faults.py): listing, HEADs and range reads are
    each hit, tried again, and the job ends as it would have without them."""
    url = f"s3://{bucket}/clips"
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    clean = _run_job(compose_config, vllm_engine, f"input_dir={url}", f"output={tmp_path / 'clean.jsonl'}",
                     "references=null")
    assert clean["exit_status"] == EXIT_OK
    port = free_port()
    pattern = ",".join(f"{n}:{kind}" for n, kind in zip(range(2, 60, 3), ["slowdown", "drop", "cut"] * 7))
    proxy = fault_proxy(port, s3.port, pattern)
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
        out = tmp_path / "faulty.jsonl"
        summary = _run_job(compose_config, vllm_engine, f"input_dir={url}", f"output={out}", "references=null")
    finally:
        proxy.kill()
    faults = proxy.communicate()[0].splitlines()
    assert summary["exit_status"] == EXIT_OK, summary.get("failures")
    kinds = {line.split()[1] for line in faults}
    assert kinds == {"slowdown", "drop", "cut"} and len(faults) >= 9, faults
    records, clean_records = _records(out), _records(tmp_path / "clean.jsonl")
    assert sorted(r["video"] for r in records) == sorted(r["video"] for r in clean_records)  # once each
    assert {r["video"]: r["caption"] for r in records} == {r["video"]: r["caption"] for r in clean_records}


def test_a_store_that_goes_away_mid_run_stops_the_job_and_the_same_command_resumes(s3, bucket, tmp_path,
                                                                                  compose_config, vllm_engine,
                                                                                  monkeypatch):
    """The job reaches the store through a proxy that, from its 20th request on (one decoder reads the clips
    in order: an early clip's), resets every connection and closes its port: to the job, a store gone.
    The same job through a new proxy resumes."""
    url, out, port = f"s3://{bucket}/clips", tmp_path / "captions.jsonl", free_port()
    for name, value in s3.env(f"http://127.0.0.1:{port}").items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # botocore's own setting: a store gone is found in seconds
    overrides = [f"input_dir={url}", f"output={out}", "references=null"]
    proxy = fault_proxy(port, s3.port, "20:gone")
    try:
        summary = _run_job(compose_config, vllm_engine, *overrides)
    finally:
        proxy.kill()
    assert proxy.communicate()[0].split()[1:2] == ["gone"]
    assert summary["exit_status"] == EXIT_INPUT_GONE and summary["stopped"] == "input gone", summary
    assert f"`input_dir={url}` went away while the job ran" in summary["stop_reason"]
    assert "run the same command again" in summary["stop_reason"]
    first = _records(out)
    assert len(first) < 6 and all(r["status"] == "ok" for r in first)  # no error record for the store's fault
    proxy = fault_proxy(port, s3.port)
    try:
        again = _run_job(compose_config, vllm_engine, *overrides)
    finally:
        proxy.kill()
    assert again["exit_status"] == EXIT_OK, again.get("failures")
    records = _records(out)
    assert records[: len(first)] == first and sorted(r["video"] for r in records) == [f"clip_{i:05d}.mp4"
                                                                                      for i in range(6)]
