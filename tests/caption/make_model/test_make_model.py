"""caption-make-model: random-weight checkpoints that stock vLLM and transformers load like real ones.

Fast tests: determinism, sharding, the preset shapes' configs (no weights written), refusals.
Slow tests: for each family's `tiny` checkpoint, one real decoded clip through stock vLLM (CPU,
in-process engine) and transformers `generate`: same prompt ids, the video placeholder expanded
as the family's processor does, and the same greedy tokens.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from caption.make_model import FAMILY_NAMES, MakeModelError, build_config, make_checkpoint, shapes
from caption.make_model.common import is_embedding, meta_model, release_tensors
from caption.prompts import build_prompt
from caption.settings.config import CONF_DIR, REPO_ROOT

GREEDY_TOKENS = 16
FRAME_SIDE = 64  # tiny frames keep both engines small


def file_digests(folder: Path) -> dict[str, str]:
    """Every file's digest; the job preset names the folder itself, so that path is masked."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes().replace(str(folder.resolve()).encode(), b"<out>"))
            .hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("made")
    return {family: Path(make_checkpoint(family, "tiny", root / family, seed=0)["out"]) for family in FAMILY_NAMES}


# --- fast: what is written ---------------------------------------------------------------------------

@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_same_seed_gives_byte_identical_files(family, tiny_models, tmp_path):
    again = make_checkpoint(family, "tiny", tmp_path / "again", seed=0)
    assert file_digests(Path(again["out"])) == file_digests(tiny_models[family])
    other = make_checkpoint(family, "tiny", tmp_path / "other", seed=1)
    changed = {k for k, v in file_digests(Path(other["out"])).items() if file_digests(tiny_models[family])[k] != v}
    assert changed == {"model.safetensors"}  # the seed changes the weights and nothing else


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_tiny_checkpoint_loads_in_transformers_with_release_key_names(family, tiny_models):
    import torch
    from safetensors import safe_open
    from transformers import AutoModelForImageTextToText, AutoTokenizer

    folder = tiny_models[family]
    tokens = len(AutoTokenizer.from_pretrained(folder))
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
        embed = f.get_tensor(next(k for k in keys if k.endswith("embed_tokens.weight")))
        q_proj = f.get_tensor(next(k for k in sorted(keys) if k.endswith("q_proj.weight")))
    prefix = {"qwen2_5_vl": ("model.layers.", "visual.blocks."),
              "qwen3_vl": ("model.language_model.layers.", "model.visual.blocks."),
              "llava_next_video": ("language_model.model.layers.", "vision_tower.vision_model.encoder.")}[family]
    for p in prefix:  # the layout of the released checkpoints (what vLLM's loaders map from)
        assert any(k.startswith(p) for k in keys), (p, sorted(keys)[:5])
    # scaled by fan-in, not the 0.02 default: one-hot lookups std 1, matrices 1/sqrt(inputs)
    assert embed[:tokens].std().item() == pytest.approx(1.0, rel=0.05)
    assert q_proj.std().item() == pytest.approx(q_proj.shape[1] ** -0.5, rel=0.05)
    assert len(embed) > tokens and not embed[tokens:].any()  # padded ids: never emitted
    model = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32)
    lookups = sum(isinstance(m, torch.nn.Embedding) for m in model.modules())
    assert sum(map(is_embedding, keys)) == lookups  # every lookup table gets the lookup init
    stored = sum(math.prod(s) for s in release_tensors(meta_model(model.config), lambda k: k).values())
    assert model.num_parameters() == stored


def test_large_models_are_written_file_by_file_and_load(tmp_path, tiny_models):
    import torch
    from transformers import AutoModelForImageTextToText

    made = make_checkpoint("qwen2_5_vl", "tiny", tmp_path / "sharded", seed=0, shard_bytes=2 << 20)
    folder = Path(made["out"])
    assert len(made["weight_files"]) > 2
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"].values()) == set(made["weight_files"])
    assert index["metadata"]["total_size"] == made["parameters"] * 4
    one = AutoModelForImageTextToText.from_pretrained(tiny_models["qwen2_5_vl"], dtype=torch.float32).state_dict()
    sharded = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32).state_dict()
    assert one.keys() == sharded.keys()
    assert all(torch.equal(one[k], sharded[k]) for k in one)  # a tensor's values do not depend on its file


def test_bfloat16_checkpoint_holds_bfloat16(tmp_path):
    from safetensors import safe_open

    made = make_checkpoint("qwen3_vl", "tiny", tmp_path / "bf16", dtype="bfloat16")
    assert json.loads((Path(made["out"]) / "config.json").read_text())["dtype"] == "bfloat16"
    with safe_open(str(Path(made["out"]) / "model.safetensors"), "pt") as f:
        assert {str(f.get_slice(k).get_dtype()) for k in f.keys()} == {"BF16"}
    assert made["weight_bytes"] < made["parameters"] * 2 + (1 << 20)
    # the cpu tier (gpu.dtype=auto) runs it in bf16 where this CPU has bf16 arithmetic, else in float32
    from hydra import compose, initialize_config_dir

    from caption.planning import load_planned_job
    from quant.cpu_kernels import has_native_bf16

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"hydra.searchpath=[file://{made['out']}/vidcap_preset]",
                                                       "model=random_qwen3_vl_tiny", "plan_only=true"])
    plan = load_planned_job(cfg).plan
    assert plan.dtype == ("bfloat16" if has_native_bf16() else "float32")
    assert any("no AVX512-BF16" in w for w in plan.warnings) != has_native_bf16()


# The preset's arch numbers, as each family's config.json spells them.
TEXT_KEYS = {"num_layers": "num_hidden_layers", "hidden_size": "hidden_size", "num_heads": "num_attention_heads",
             "num_kv_heads": "num_key_value_heads", "intermediate_size": "intermediate_size",
             "vocab_size": "vocab_size"}
VISION_KEYS = {"qwen": {"vision_depth": "depth", "vision_hidden_size": "hidden_size",
                        "vision_intermediate_size": "intermediate_size", "patch_size": "patch_size",
                        "spatial_merge_size": "spatial_merge_size", "temporal_patch_size": "temporal_patch_size"},
               "llava": {"vision_depth": "num_hidden_layers", "vision_hidden_size": "hidden_size",
                         "vision_intermediate_size": "intermediate_size", "patch_size": "patch_size",
                         "image_size": "image_size"}}
PRESET_SHAPES = [("qwen2_5_vl", "3b"), ("qwen2_5_vl", "7b"), ("qwen2_5_vl", "72b"), ("qwen3_vl", "8b"),
                 ("llava_next_video", "7b")]


@pytest.mark.parametrize("family,shape", PRESET_SHAPES)
def test_preset_shapes_take_the_presets_numbers(family, shape, tmp_path):
    arch = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "model" / f"{family}_{shape}.yaml").arch)
    made = make_checkpoint(family, shape, tmp_path / "m", config_only=True)
    assert made["weight_files"] == [] and not list(Path(made["out"]).glob("*.safetensors"))
    written = json.loads((Path(made["out"]) / "config.json").read_text())
    assert written["dtype"] == "bfloat16"  # like the real release
    text, vision = written["text_config"], written["vision_config"]
    for ours, theirs in TEXT_KEYS.items():
        assert text[theirs] == arch[ours], ours
    for ours, theirs in VISION_KEYS["llava" if family.startswith("llava") else "qwen"].items():
        assert vision[theirs] == arch[ours], ours
    assert text.get("head_dim", text["hidden_size"] // text["num_attention_heads"]) == arch["head_dim"]
    tied = written.get("tie_word_embeddings", text.get("tie_word_embeddings"))
    assert tied == arch["tie_word_embeddings"]
    rope = text["rope_parameters"]
    assert text["max_position_embeddings"] * rope.get("factor", 1) == arch["max_position_embeddings"]
    if family == "qwen3_vl":
        assert vision["num_position_embeddings"] == arch["num_position_embeddings"]
        assert vision["deepstack_visual_indexes"] == arch["deepstack_visual_indexes"]
    if "video_max_pixels" in arch:
        video = json.loads((Path(made["out"]) / "processor_config.json").read_text())["video_processor"]
        assert video["size"] == {"shortest_edge": arch["video_min_pixels"], "longest_edge": arch["video_max_pixels"]}
    # parameters of the real architecture built from that config (meta device: no memory) vs the model card
    parameters = meta_model(build_config(family, shape)[0]).num_parameters()
    assert parameters == made["parameters"]
    assert parameters == pytest.approx(arch["params_card"], rel=0.005)


@pytest.mark.parametrize("family,shape", [(family, shape) for family in FAMILY_NAMES for shape in shapes(family)])
def test_the_planners_parameter_formulas_count_the_made_model(family, shape):
    """quant/memory.py sizes every plan from arch numbers; the architecture transformers builds from the
    same numbers (meta device: no memory), for every shape and every preset in conf/model/, must agree."""
    from quant.memory import param_counts

    config, _, arch = build_config(family, shape)
    assert sum(param_counts(family, arch)) == meta_model(config).num_parameters()


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_the_job_plans_a_made_model_from_its_own_preset(family, tiny_models):
    from hydra import compose, initialize_config_dir

    from caption.planning import load_planned_job

    [preset] = (tiny_models[family] / "vidcap_preset" / "model").glob("*.yaml")
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"hydra.searchpath=[file://{preset.parent.parent}]",
                                                       f"model={preset.stem}", "plan_only=true"])
    job = load_planned_job(cfg)
    assert job.model.family == family and Path(job.model.path) == tiny_models[family].resolve()
    assert job.model.name == f"random-{family}-tiny"
    assert job.plan.fits


def test_shapes_without_numbers_are_refused_in_one_line(tmp_path):
    assert shapes("qwen3_vl") == ["tiny", "cpu", "8b"]
    with pytest.raises(MakeModelError, match="no preset conf/model/qwen3_vl_3b.yaml"):
        make_checkpoint("qwen3_vl", "3b", tmp_path / "x")
    assert not (tmp_path / "x").exists()
    run = subprocess.run([sys.executable, "-m", "caption.make_model", "--family", "llava_next_video", "--shape",
                          "3b", "--out", str(tmp_path / "y")], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, timeout=120)
    assert run.returncode == 2
    assert run.stderr.strip().count("\n") == 0 and "shapes for llava_next_video: tiny, cpu, 7b" in run.stderr


def test_an_occupied_folder_or_unknown_shape_is_refused_before_the_model_code_is_imported(tmp_path):
    """The refusals that need no model code are said before torch and transformers are imported."""
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "notes.txt").write_text("mine")
    for shape, out, said in [("tiny", occupied, "is not empty"), ("3b", tmp_path / "new", "no preset")]:
        code = ("import sys\nfrom caption.make_model.cli import main\n"
                f"try:\n    main(['--family', 'qwen3_vl', '--shape', {shape!r}, '--out', {str(out)!r}])\n"
                "finally:\n    print([m for m in ('torch', 'transformers') if m in sys.modules])")
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
        assert run.returncode == 2 and said in run.stderr and run.stderr.strip().count("\n") == 0, run.stderr
        assert run.stdout.strip() == "[]", f"{shape}: imported {run.stdout.strip()} before refusing"
    assert (occupied / "notes.txt").read_text() == "mine" and not (tmp_path / "new").exists()


def test_a_non_empty_folder_is_never_overwritten_silently(tiny_models):
    before = file_digests(tiny_models["qwen2_5_vl"])
    with pytest.raises(MakeModelError, match="not empty"):
        make_checkpoint("qwen2_5_vl", "tiny", tiny_models["qwen2_5_vl"], seed=5)
    assert file_digests(tiny_models["qwen2_5_vl"]) == before


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_chat_template_gives_the_jobs_prompt(family, tiny_models):
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(tiny_models[family])
    messages = [{"role": "user", "content": [{"type": "video"},
                                             {"type": "text", "text": "이 영상을 한 문장으로 설명해 주세요."}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text == build_prompt(family, "caption")


# --- slow: both engines on a real clip ----------------------------------------------------------------

def _clip(synth_dir):
    from video_io.decode import DecodeSpec, decode_clip
    from video_io.sampling import SamplingSpec

    return decode_clip(str(synth_dir / "clip_00000.mp4"),
                       DecodeSpec(SamplingSpec(num_frames=8), width=FRAME_SIDE, height=FRAME_SIDE))


def _transformers_run(folder: Path, prompt: str, clip):
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor
    from transformers.video_utils import VideoMetadata

    from vidcap_ko.families.qwen2_5_vl import transformers_fix

    transformers_fix()  # Qwen2.5-VL positions as vLLM computes them (what the project's HF engine runs)
    processor = AutoProcessor.from_pretrained(folder)
    metadata = {k: v for k, v in clip.metadata().items() if k != "do_sample_frames"}
    inputs = processor(text=[prompt], videos=[clip.frames], video_metadata=[VideoMetadata(**metadata)],
                       do_sample_frames=False, return_tensors="pt")
    model = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.inference_mode():  # min = max: end-of-text is suppressed, as vLLM's min_tokens does
        out = model.generate(**inputs, max_new_tokens=GREEDY_TOKENS, min_new_tokens=GREEDY_TOKENS, do_sample=False)
    prompt_ids = inputs["input_ids"][0].tolist()
    return prompt_ids, out[0, len(prompt_ids):].tolist(), inputs, processor


def _vllm_run(folder: Path, prompt: str, clip):
    os.environ.update(VLLM_ENABLE_V1_MULTIPROCESSING="0", VLLM_CPU_KVCACHE_SPACE="1",
                      VLLM_CPU_OMP_THREADS_BIND=",".join(map(str, sorted(os.sched_getaffinity(0)))),
                      VLLM_CPU_NUM_OF_RESERVED_CPU="0")
    from caption.engines.vllm_fixes import guard_kernel_rebind_scan, shutdown_llm, start_llm

    guard_kernel_rebind_scan()  # a second engine in one process (see caption/engines/vllm_engine.py)
    from vllm import LLM, SamplingParams

    # started and stopped as the job's engine is: its collections leave out this process's heap
    llm = start_llm(lambda: LLM(model=str(folder), dtype="float32", max_model_len=2048, enforce_eager=True, seed=0,
                                limit_mm_per_prompt={"image": 0, "video": 1}, block_size=32))
    try:
        [output] = llm.generate([{"prompt": prompt, "multi_modal_data": {"video": (clip.frames, clip.metadata())}}],
                                SamplingParams(temperature=0.0, max_tokens=GREEDY_TOKENS, min_tokens=GREEDY_TOKENS),
                                use_tqdm=False)
    finally:
        shutdown_llm(llm)  # keeps the session's other in-process engines working
    return list(output.prompt_token_ids), list(output.outputs[0].token_ids)


def _expected_video_tokens(family: str, config: dict, inputs, frames: int) -> int:
    """Video tokens the family's processor puts in place of its one placeholder."""
    if family == "llava_next_video":
        vision = config["vision_config"]
        side = vision["image_size"] // vision["patch_size"] // config["spatial_pool_stride"]
        return frames * side * side  # every frame pooled to side x side
    merge = config["vision_config"]["spatial_merge_size"]
    return int(inputs["video_grid_thw"].prod(-1).sum()) // merge ** 2


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_vllm_and_transformers_agree_on_a_real_clip(family, tiny_models, synth_dir):
    folder = tiny_models[family]
    config = json.loads((folder / "config.json").read_text())
    clip = _clip(synth_dir)
    prompt = build_prompt(family, "caption")
    hf_prompt, hf_tokens, inputs, processor = _transformers_run(folder, prompt, clip)
    vllm_prompt, vllm_tokens = _vllm_run(folder, prompt, clip)

    video_id = config.get("video_token_id", config.get("video_token_index"))
    placeholder_ids = processor.tokenizer(prompt)["input_ids"]
    assert placeholder_ids.count(video_id) == 1  # the prompt text carries one placeholder
    expected = _expected_video_tokens(family, config, inputs, len(clip.frames))
    assert hf_prompt.count(video_id) == expected
    assert vllm_prompt == hf_prompt  # same text ids and the placeholder expanded the same way
    if family == "qwen3_vl":  # the processor writes "<t seconds>" before each temporal patch's tokens
        groups = int(inputs["video_grid_thw"][:, 0].sum())
        assert processor.tokenizer.decode(hf_prompt).count(" seconds><|vision_start|>") == groups > 1
    assert len(set(hf_tokens)) > 3  # fan-in init: varied tokens, so agreement means something
    assert vllm_tokens == hf_tokens


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_each_family_captions_through_the_job_on_both_engines(family, tiny_models, synth_dir, tmp_path,
                                                              compose_config):
    """The whole job (decoding, admission, prompts, records) with each family's tiny checkpoint, from the
    preset caption-make-model wrote: every record ok on vLLM and on transformers, the same greedy captions
    and prompt lengths, and the video tokens the processor really produced equal to the planner's formula
    for the decoded frame size, and within the plan's count (the worst frame shape the pixel budget allows,
    where the preset does not fix the size)."""
    from transformers import AutoProcessor
    from transformers.video_utils import VideoMetadata

    from caption.job import run_job
    from caption.planning import load_planned_job
    from quant.memory import vision_tokens
    from vidcap_ko.families import get_family
    from video_io.decode import decode_clip

    [preset] = (tiny_models[family] / "vidcap_preset" / "model").glob("*.yaml")
    clips = tmp_path / "clips"
    clips.mkdir()
    for i in range(2):
        shutil.copy(synth_dir / f"clip_{i:05d}.mp4", clips)
    records = {}
    for engine in ("vllm", "hf"):
        out = tmp_path / f"{engine}.jsonl"
        overrides = [f"hydra.searchpath=[file://{preset.parent.parent}]", f"model={preset.stem}",
                     f"engine={engine}", f"input_dir={clips}", f"output={out}", "progress=false", "references=null"]
        job = load_planned_job(compose_config(overrides))
        summary = run_job(compose_config(overrides))
        assert summary["exit_status"] == 0 and summary["captions_ok"] == 2, summary.get("failures")
        records[engine] = {r["video"]: r for r in map(json.loads, out.read_text(encoding="utf-8").splitlines())}
        assert all(r["status"] == "ok" and r["engine"] == engine and r["output_tokens"] > 0
                   for r in records[engine].values())
    for field in ("caption", "prompt_tokens", "output_tokens"):
        assert {v: r[field] for v, r in records["vllm"].items()} == {v: r[field] for v, r in records["hf"].items()}
    # the planner's video tokens = the placeholders the family's processor expands a decoded clip to
    clip = decode_clip(str(clips / "clip_00000.mp4"), job.decode)
    processor = AutoProcessor.from_pretrained(tiny_models[family])
    inputs = processor(text=[build_prompt(family, "caption")], videos=[clip.frames],
                       video_metadata=[VideoMetadata(**{k: v for k, v in clip.metadata().items()
                                                         if k != "do_sample_frames"})],
                       do_sample_frames=False, **get_family(family).processor_kwargs, return_tensors="pt")
    config = json.loads((tiny_models[family] / "config.json").read_text())
    video_id = config.get("video_token_id", config.get("video_token_index"))
    used = int((inputs["input_ids"] == video_id).sum())
    height, width = clip.frames.shape[1:3]
    arch = OmegaConf.to_container(OmegaConf.load(preset).arch)
    assert used == vision_tokens(family, arch, len(clip.frames), width, height) <= job.plan.vision_tokens_per_clip
    # and both engines report the same count in the record
    assert [r["video_tokens"] for e in ("vllm", "hf") for v, r in records[e].items() if v.endswith("clip_00000.mp4")] \
        == [used, used]
