"""`gpu=auto`: which tier (conf/gpu/) this machine is, from what its GPUs say they are.

No CUDA device: the cpu tier. Otherwise the tier whose card the device's name names (a word match:
"NVIDIA L4" is l4, "NVIDIA L40S" is not), else the largest tier whose memory the device holds (an
RTX 4090's 24 GB: l4; an H200: h100), else the smallest GPU tier. The devices are asked with
`nvidia-smi`, never through CUDA in this process: CUDA must not start here before vLLM's engine
process forks (video_io/nvdec.py says why).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

NVIDIA_SMI_QUERY = ["--query-gpu=name,memory.total", "--format=csv,noheader,nounits"]


@dataclass(frozen=True)
class Device:
    name: str  # as the driver names it, e.g. "NVIDIA H100 80GB HBM3"
    memory_gib: float  # total, as the driver reports it


def parse_nvidia_smi(text: str) -> list[Device]:
    """`nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits` output (MiB) as Devices."""
    devices = []
    for line in text.strip().splitlines():
        name, _, mib = line.rpartition(",")
        try:
            devices.append(Device(name.strip(), round(float(mib) / 1024, 1)))
        except ValueError:
            continue  # "[N/A]" or a line that is not a device
    return devices


def detect_devices(timeout_s: float = 10.0) -> list[Device]:
    """This machine's NVIDIA GPUs; [] where there are none (or no driver to say so)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        done = subprocess.run([smi, *NVIDIA_SMI_QUERY], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_nvidia_smi(done.stdout) if done.returncode == 0 else []


def pick_tier(devices: list[Device], tiers: dict[str, dict]) -> tuple[str, str]:
    """(tier name, why) for these devices, among `tiers` (name -> preset: device, vram_gib)."""
    if not devices:
        return "cpu", "no NVIDIA GPU found (nvidia-smi lists none)"
    gpu_tiers = {name: t for name, t in tiers.items() if t.get("device") == "cuda"}
    device = devices[0]
    count = f"{len(devices)} x " if len(devices) > 1 else ""
    seen = f"{count}{device.name} ({device.memory_gib:g} GiB)"
    for name in sorted(gpu_tiers, key=len, reverse=True):
        if re.search(rf"(?<![A-Za-z0-9]){re.escape(name)}(?![A-Za-z0-9])", device.name, re.IGNORECASE):
            return name, f"{seen}: its name is the {name} tier's card"
    by_memory = sorted(gpu_tiers, key=lambda n: float(gpu_tiers[n].get("vram_gib") or 0))
    held = [n for n in by_memory if float(gpu_tiers[n].get("vram_gib") or 0) <= device.memory_gib + 0.5]
    if held:
        name = held[-1]
        return name, (f"{seen}: no tier names this card; {name} is the largest tier whose memory "
                      f"({gpu_tiers[name]['vram_gib']:g} GiB) it holds")
    name = by_memory[0]
    return name, f"{seen}: smaller than every tier; the smallest, {name}, is the closest"


def resolve_tier(gpu: dict, devices: list[Device] | None = None) -> tuple[dict, str | None]:
    """`gpu=auto` as the tier this machine is: (the tier's preset with the keys set in `gpu` on top,
    why this tier); any other `gpu` comes back as it is, with no reason."""
    from quant import presets

    if gpu.get("name") != presets.AUTO_TIER:
        return gpu, None
    devices = detect_devices() if devices is None else devices
    name, why = pick_tier(devices, {t: presets.load("gpu", t) for t in presets.tiers()})
    tier = _merged(presets.load("gpu", name), {k: v for k, v in gpu.items() if k != "name"})
    if gpu.get("count") is None and len(devices) > 1 and len({d.name for d in devices}) == 1:
        tier["count"] = len(devices)
        why += f"; gpu.count={len(devices)}"
    return tier, f"gpu=auto: {name} ({why})"


def _merged(tier: dict, given: dict) -> dict:
    """The tier's values, with each value `given` sets (None: not set) on top, nested mappings key by key."""
    out = dict(tier)
    for key, value in given.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        elif isinstance(value, dict):
            out[key] = {k: v for k, v in value.items() if v is not None} or out.get(key)
        elif value is not None:
            out[key] = value
    return out


def tier_not_here(gpu: dict, devices: list[Device] | None = None) -> str | None:
    """Why a named CUDA tier (`gpu=t4`) cannot run on this machine, or None where it can: this machine's
    GPU is that tier's (the tier gpu=auto would pick here), or the tier is rehearsed on a bigger card
    (gpu.cap_to_tier=true; the plan checks the card holds it). Without that GPU a job would run elsewhere
    (on the CPU) while its plan and records said the tier's dtype and quantization."""
    from quant import presets

    name = str(gpu.get("name"))
    if gpu.get("device") != "cuda" or name == presets.AUTO_TIER:
        return None
    devices = detect_devices() if devices is None else devices
    if not devices:
        return (f"`gpu={name}` plans for an NVIDIA {name.upper()} and this machine has no NVIDIA GPU (nvidia-smi "
                f"lists none): use gpu=auto (here: the cpu tier) to run here, or add plan_only=true to see the "
                f"{name} plan without running it")
    if gpu.get("cap_to_tier"):
        return None
    picked, why = pick_tier(devices, {t: presets.load("gpu", t) for t in presets.tiers()})
    if picked == name:
        return None
    return (f"`gpu={name}` plans for an NVIDIA {name.upper()} ({gpu.get('vram_gib')} GiB) and this machine's GPU is "
            f"the {picked} tier ({why}): use gpu=auto to run as this card, add gpu.cap_to_tier=true to rehearse "
            f"{name}'s memory on it (docs/tiers.md), or plan_only=true to see the plan without running it")
