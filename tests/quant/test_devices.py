"""gpu=auto: the tier from what the machine's GPUs say they are (recorded nvidia-smi answers), and the
cpu tier for real on this machine."""

from __future__ import annotations

import os

import pytest

from quant import presets
from quant.devices import Device, detect_devices, parse_nvidia_smi, pick_tier, resolve_tier

TIERS = {name: presets.load("gpu", name) for name in presets.tiers()}

# `nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits` as those cards answer it
ANSWERS = {
    "Tesla T4, 15360": ("t4", "its name is the t4 tier's card"),
    "NVIDIA L4, 23034": ("l4", "its name is the l4 tier's card"),
    "NVIDIA A100-SXM4-40GB, 40960": ("a100", "its name is the a100 tier's card"),
    "NVIDIA A100-SXM4-80GB, 81920": ("a100", "its name is the a100 tier's card"),
    "NVIDIA H100 80GB HBM3, 81559": ("h100", "its name is the h100 tier's card"),
    "NVIDIA H100 PCIe, 81559\nNVIDIA H100 PCIe, 81559": ("h100", "gpu.count=2"),
    "NVIDIA L40S, 46068": ("a100", "no tier names this card; a100 is the largest tier whose memory"),
    "NVIDIA H200, 143771": ("h100", "no tier names this card; h100 is the largest tier whose memory"),
    "NVIDIA GeForce RTX 4090, 24564": ("l4", "no tier names this card; l4 is the largest tier whose memory"),
    "Tesla P4, 7680": ("t4", "smaller than every tier; the smallest, t4, is the closest"),
    "": ("cpu", "no NVIDIA GPU found"),
}


@pytest.mark.parametrize("answer", list(ANSWERS))
def test_the_tier_of_a_recorded_device(answer):
    tier, why = ANSWERS[answer]
    resolved, reason = resolve_tier({"name": "auto"}, parse_nvidia_smi(answer))
    assert resolved["name"] == tier and reason.startswith(f"gpu=auto: {tier} (") and why in reason
    assert pick_tier(parse_nvidia_smi(answer), TIERS)[0] == tier


def test_settings_given_with_auto_override_the_detected_tiers():
    devices = [Device("NVIDIA L4", 22.5)]
    resolved, _ = resolve_tier({"name": "auto", "max_num_seqs": 4, "env": {"VLLM_CPU_KVCACHE_SPACE": None},
                                "dtype": None}, devices)
    assert resolved["max_num_seqs"] == 4 and resolved["dtype"] == TIERS["l4"]["dtype"]
    assert resolved["env"] == TIERS["l4"]["env"]
    named, reason = resolve_tier(TIERS["t4"], devices)  # gpu=t4 names a tier: nothing is detected
    assert named == TIERS["t4"] and reason is None


def test_this_machine_is_the_cpu_tier(compose_config, synth_dir, tmp_path):
    from caption.planning import load_planned_job

    assert detect_devices() == []  # no NVIDIA GPU here (CI and development machines alike)
    job = load_planned_job(compose_config([f"input_dir={synth_dir}", f"output={tmp_path / 'o.jsonl'}"]))  # gpu=auto
    assert job.gpu["name"] == "cpu" and job.plan.tier == "cpu"
    assert job.plan.notes[0].startswith("gpu=auto: cpu (no NVIDIA GPU found")


@pytest.mark.parametrize("answer, tier, runs", [
    ("NVIDIA H100 80GB HBM3, 81559", "h100", True),     # the tier's own card
    ("NVIDIA H200, 143771", "h100", True),              # the tier gpu=auto picks there
    ("Tesla T4, 15360", "t4", True),
    ("NVIDIA H100 80GB HBM3, 81559", "t4", False),      # another card: plan, or rehearse with cap_to_tier
    ("Tesla T4, 15360", "h100", False),
    ("", "t4", False),                                  # no NVIDIA GPU at all
])
def test_a_named_cuda_tier_runs_only_on_its_gpu(answer, tier, runs):
    """What the recorded nvidia-smi answers say about running a named tier here (quant/devices.py
    tier_not_here); the job refuses the others in that one line unless plan_only (caption/planning.py)."""
    from quant.devices import tier_not_here

    devices = parse_nvidia_smi(answer)
    why = tier_not_here(TIERS[tier], devices)
    assert (why is None) == runs
    if not runs:
        assert why.startswith(f"`gpu={tier}` plans for an NVIDIA {tier.upper()}") and "plan_only=true" in why
        assert ("no NVIDIA GPU" in why) == (not devices) and ("gpu.cap_to_tier=true" in why) == bool(devices)
    rehearsed = tier_not_here({**TIERS[tier], "cap_to_tier": True}, devices)
    assert (rehearsed is None) == bool(devices)  # rehearsing needs a card (the plan checks it holds the tier)
    assert tier_not_here(TIERS["cpu"], devices) is None


@pytest.mark.parametrize("answer, tier", [("NVIDIA H100 80GB HBM3, 81559", "h100"), ("Tesla T4, 15360", "t4"),
                                          ("NVIDIA L4, 23034", "l4"), ("NVIDIA A100-PCIE-40GB, 40536", "a100")])
def test_each_tier_rehearses_on_its_own_card(answer, tier, compose_config, synth_dir, tmp_path, monkeypatch):
    """The job reads the card's memory as the tiers declare theirs (nvidia-smi's memory.total): on an
    H100, CUDA's own total (79.18 GiB) was below the h100 tier's 79.6 and `gpu=h100 gpu.cap_to_tier=true`
    was refused as too small. Here nvidia-smi is a script giving the card's recorded answer."""
    from caption.planning import load_planned_job

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho '{answer}'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    assert pick_tier(detect_devices(), TIERS)[0] == tier  # the card is the tier's own
    job = load_planned_job(compose_config([f"input_dir={synth_dir}", f"output={tmp_path / 'o.jsonl'}", f"gpu={tier}",
                                           "gpu.cap_to_tier=true", "model=qwen2_5_vl_3b", "quant=none",
                                           "plan_only=true"]))
    assert job.plan.fits, job.plan.reasons
    card = parse_nvidia_smi(answer)[0].memory_gib
    assert any(w.startswith(f"rehearsing {tier} on a {card:g} GiB device") for w in job.plan.warnings)
