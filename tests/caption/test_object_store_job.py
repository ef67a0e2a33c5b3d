"""The job on videos in object storage (input_dir=s3://bucket/prefix), against a real S3 API on loopback
(moto's server: tests/support/s3_server.py): the same greedy captions as from the same files on disk, records
that name the object's version, an overwritten object refused or captioned anew, a store that cannot be
reached stopped in one line before the model loads, and the secret key in no file the job writes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.caption.in_process import run_caption
from tests.support.s3_server import SECRET, folder_files, free_port
from vidcap_ko_outputs.exit_status import EXIT_INPUT_GONE, EXIT_OK, EXIT_USAGE

pytestmark = pytest.mark.slow  # each job loads an engine


def _env(s3, **extra) -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", **s3.env(), **extra}


def _caption(tmp_path: Path, env: dict, *overrides: str, run: str = "run"):
    return run_caption([*overrides, "progress=false", f"hydra.run.dir={tmp_path / run}"], env=env, cwd=tmp_path)


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def bucket(s3, synth_dir):
    """caption-synth's clips and their references.jsonl under clips/ in a bucket of the test's own."""
    return s3.bucket(folder_files(synth_dir, prefix="clips/"))


def test_the_store_gives_the_folders_greedy_captions_and_records_name_each_objects_version(s3, bucket, synth_dir,
                                                                                          tmp_path):
    done = _caption(tmp_path, _env(s3), f"input_dir={synth_dir}", f"output={tmp_path / 'disk.jsonl'}", run="disk")
    assert done.returncode == EXIT_OK, done.stderr[-3000:]
    url = f"s3://{bucket}/clips"
    done = _caption(tmp_path, _env(s3), f"input_dir={url}", f"output={tmp_path / 'store.jsonl'}", run="store")
    assert done.returncode == EXIT_OK, done.stderr[-3000:]
    disk, store = _records(tmp_path / "disk.jsonl"), _records(tmp_path / "store.jsonl")
    assert sorted((r["video"], r["caption"]) for r in store) == sorted((r["video"], r["caption"]) for r in disk)
    assert len(store) == len(list(synth_dir.glob("*.mp4")))
    sizes = {p.name: p.stat().st_size for p in synth_dir.glob("*.mp4")}
    for record in store:
        source = record["source"]
        assert source["input_dir"] == url and source["size"] == sizes[record["video"]] and source["etag"]
        assert 0 < record["fetched_bytes"] <= 2 * source["size"]
    # scored as the folder is: against the references.jsonl beside the clips in the store
    summaries = [json.loads(Path(f"{tmp_path / name}.jsonl.summary.json").read_text()) for name in ("disk", "store")]
    assert summaries[1]["meteor"] == summaries[0]["meteor"] is not None
    assert summaries[1]["input_dir"] == url
    # resumed: every object is done, nothing is captioned again
    done = _caption(tmp_path, _env(s3), f"input_dir={url}", f"output={tmp_path / 'store.jsonl'}", run="again")
    assert done.returncode == EXIT_OK and "already done" in done.stdout, done.stderr[-3000:]
    assert len(_records(tmp_path / "store.jsonl")) == len(store)
    # the secret key is in no file the jobs wrote (records, summaries, run folders, logs)
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written and not [p for p in written if SECRET.encode() in p.read_bytes()]


def test_an_overwritten_object_is_refused_then_captioned_anew(s3, bucket, synth_dir, tmp_path):
    url, out = f"s3://{bucket}/clips", tmp_path / "captions.jsonl"
    done = _caption(tmp_path, _env(s3), f"input_dir={url}", f"output={out}", "references=null")
    assert done.returncode == EXIT_OK, done.stderr[-3000:]
    first = {r["video"]: r for r in _records(out)}
    s3.put(bucket, "clips/clip_00001.mp4", synth_dir / "clip_00002.mp4")  # re-exported in place
    done = _caption(tmp_path, _env(s3), f"input_dir={url}", f"output={out}", "references=null", run="refused")
    lines = [line for line in done.stderr.splitlines() if line.startswith("caption:")]
    assert done.returncode == EXIT_USAGE and len(lines) == 1, done.stderr[-3000:]
    assert "'clip_00001.mp4'" in lines[0] and first["clip_00001.mp4"]["source"]["etag"] in lines[0]
    assert "recaption_changed=true" in lines[0]
    done = _caption(tmp_path, _env(s3), f"input_dir={url}", f"output={out}", "references=null",
                    "recaption_changed=true", run="anew")
    assert done.returncode == EXIT_OK, done.stderr[-3000:]
    now = {r["video"]: r for r in _records(out)}
    assert now["clip_00001.mp4"]["source"]["etag"] != first["clip_00001.mp4"]["source"]["etag"]
    assert now["clip_00001.mp4"]["source"]["size"] == (synth_dir / "clip_00002.mp4").stat().st_size
    assert now["clip_00000.mp4"] == first["clip_00000.mp4"]


def test_a_store_that_cannot_be_reached_or_a_url_with_a_key_is_one_line_before_anything_loads(s3, bucket, tmp_path):
    unreachable = _env(s3, AWS_ENDPOINT_URL=f"http://127.0.0.1:{free_port()}")
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
