"""Reference tables computed from the code and conf/, one function per generated snippet:
the GPU tiers (conf/gpu/ through quant/'s planner), the quantization rule (quant/rules.py), the model
presets (conf/model/ through quant/memory.py), the sampling presets (conf/sampling/), the exit
statuses (vidcap_ko/exit_status.py) and the scale-out model (caption/bench/scaleout.py)."""

from __future__ import annotations

import re
from pathlib import Path

from omegaconf import OmegaConf

from scripts.docsgen.conf_yaml import read_group
from scripts.docsgen.markdown import code, page, table


def tiers() -> str:
    from quant.cli import tiers_table

    return page("conf/gpu/*.yaml through quant/ (python -m quant.cli table)", tiers_table())


def quant_rule() -> str:
    from quant.rules import BANDS_GIB, choose_quant

    small, medium, large = BANDS_GIB
    probes = [(f"<= {small} GiB", small), (f"<= {medium} GiB", medium), (f"<= {large} GiB", large),
              (f"> {large} GiB", large + 1)]
    rows = [[band, *(_method(choose_quant(vram, priority)) for priority in ("quality", "memory"))]
            for band, vram in probes]
    return page("quant/rules.py choose_quant", table(["gpu.vram_gib", "quant.priority=quality (default)",
                                                      "quant.priority=memory"], rows))


def _method(choice) -> str:
    names = {"none": "16-bit (none)", "awq": "AWQ 4-bit", "nf4": "nf4 + double quant", "int8": "int8"}
    return names.get(choice.method, choice.method)


def model_presets() -> str:
    from quant.cli import presets_table

    return page("conf/model/*.yaml through quant/memory.py (python -m quant.cli presets)", presets_table())


SAMPLING_COLUMNS = ("temperature", "top_p", "top_k", "repetition_penalty", "max_new_tokens", "min_new_tokens",
                    "no_repeat_ngram_size", "num_beams", "length_penalty", "early_stopping")


def sampling_presets(conf_dir: Path) -> str:
    rows = []
    for preset in read_group(conf_dir, "sampling"):
        values = _composed(conf_dir, "sampling", preset.path.stem)
        source = re.search(r"Source: (.*?)(?:\.\s|\.?$)", preset.description)
        rows.append([f"`{preset.path.stem}`", *(code(values.get(c)) for c in SAMPLING_COLUMNS),
                     source.group(1) if source else ""])
    return page("conf/sampling/*.yaml", table(["preset", *SAMPLING_COLUMNS, "source"], rows))


def _composed(conf_dir: Path, group: str, option: str) -> dict:
    """An option's values with its `defaults:` parents merged under it (as Hydra composes a group)."""
    raw = OmegaConf.load(Path(conf_dir) / group / f"{option}.yaml")
    parents = [p for p in raw.get("defaults", []) if p != "_self_"]
    merged = OmegaConf.merge(*[_composed(conf_dir, group, p) for p in parents], raw) if parents else raw
    merged = OmegaConf.to_container(merged, resolve=False)
    merged.pop("defaults", None)
    return merged


def exit_statuses() -> str:
    """vidcap_ko/exit_status.py's docstring lists the statuses; each must be one of its EXIT_ constants."""
    import vidcap_ko.exit_status as outcome

    constants = {value for name, value in vars(outcome).items() if name.startswith("EXIT_")}
    rows, listed = [], set()
    for line in outcome.__doc__.splitlines():
        found = re.match(r"^\s{4}(\d+)\s+(.*)$", line)
        if found:
            rows.append([int(found.group(1)), found.group(2)])
            listed.add(int(found.group(1)))
        elif rows and line.startswith(" " * 9) and line.strip():
            rows[-1][1] += " " + line.strip()
    if listed != constants:
        raise ValueError(f"vidcap_ko/exit_status.py: its docstring lists exit statuses {sorted(listed)}, its EXIT_ "
                         f"constants are {sorted(constants)}")
    return page("vidcap_ko/exit_status.py", table(["status", "meaning"], [[f"`{s}`", text] for s, text in rows]))


def scaleout_model() -> str:
    from caption.bench.scaleout import DECODE_CORE_S, ENGINE_CLIPS_PER_S, cores_per_gpu

    rows = [[tier, rate, *(f"{cores_per_gpu(tier, d):.0f}" for d in DECODE_CORE_S.values())]
            for tier, rate in ENGINE_CLIPS_PER_S.items()]
    return page("caption/bench/scaleout.py (caption-bench scaleout)",
                "CPU cores one GPU needs to stay busy: decode core-seconds per clip x the engine's clips/s, plus "
                "one core for the engine process.",
                table(["tier", "clips/s per GPU (design target)",
                       *(f"{name} ({d:g} core-s per clip)" for name, d in DECODE_CORE_S.items())], rows))
