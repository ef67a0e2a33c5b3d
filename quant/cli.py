"""Plans from the command line, without Hydra or a model:

    python -m quant.cli plan --model qwen2_5_vl_7b_awq --gpu l4 [--quant auto --priority memory --engine vllm]
    python -m quant.cli table        # the tiers table of docs/tiers.md (Qwen2.5-VL-7B, 16 frames of 448x448)
    python -m quant.cli presets      # the model presets table: parameters, weights, KV cache, video tokens
"""

from __future__ import annotations

import argparse
import json
import sys

from quant import memory, presets
from quant.errors import PlanError
from quant.plan import make_plan
from quant.report import markdown_table
from quant.rules import choose_quant, resolve_quant
from quant.tiers import Tier

TABLE_TIERS = ("t4", "l4", "a100", "h100")


def _max_new_tokens() -> int:
    """The caption length a job plans for by default: its default sampling preset's max_new_tokens."""
    return int(presets.load("sampling", presets.default_options()["sampling"])["max_new_tokens"])


def _plan(args) -> dict:
    quant = presets.load("quant", args.quant)
    if args.priority:
        quant["priority"] = args.priority
    if args.checkpoint:
        quant["checkpoint"] = args.checkpoint
    video = {k: v for k, v in (("frames", args.frames), ("width", args.width), ("height", args.height)) if v}
    return make_plan(presets.load_model(args.model), presets.load("gpu", args.gpu), quant, args.engine, video,
                     max_new_tokens=args.max_new_tokens or _max_new_tokens(), device_vram_gib=args.device_vram_gib,
                     cap_to_tier=True if args.cap_to_tier else None).to_dict()


def _table_cell(model_name: str, tier_name: str, priority: str) -> tuple[str, str, str]:
    """(engine, quant, fits) for one tier and priority: the tier's suggested engine, the AWQ release
    when the choice is AWQ (the bf16 release cannot be AWQ-quantized at load)."""
    tier_cfg = presets.load("gpu", tier_name)
    engine = Tier.from_config(tier_cfg).suggested_engine
    model = presets.load_model(model_name)
    quant = dict(presets.load("quant", "auto"), priority=priority)
    choice = resolve_quant(quant, model, Tier.from_config(tier_cfg), engine)
    if choice.method == "awq" and model.get("awq_preset"):
        model = presets.load_model(model["awq_preset"])
    rule = choose_quant(Tier.from_config(tier_cfg).vram_gib, priority).method
    shown = choice.method if rule == choice.method else f"{choice.method} (rule: {rule})"
    try:
        plan = make_plan(model, tier_cfg, quant, engine, max_new_tokens=_max_new_tokens())
    except PlanError as exc:
        return engine, shown, f"error: {exc}"
    return engine, shown, (f"yes ({plan.sequences_fit} seqs)" if plan.fits else "no")


def tiers_table(model_name: str = "qwen2_5_vl_7b") -> str:
    header = ["tier", "VRAM", "dtype", "engine", "quant (quality)", "quant (memory)", "max_num_seqs",
              "max_num_batched_tokens", "fits, quality", "fits, memory"]
    rows = []
    for name in TABLE_TIERS:
        tier = Tier.from_config(presets.load("gpu", name))
        engine, q_quality, fit_quality = _table_cell(model_name, name, "quality")
        _, q_memory, fit_memory = _table_cell(model_name, name, "memory")
        rows.append([name, f"{tier.vram_gib:g} GiB", tier.dtype, engine, q_quality, q_memory, tier.max_num_seqs,
                     tier.max_num_batched_tokens, fit_quality, fit_memory])
    return markdown_table(header, rows)


def _size(n_bytes: float) -> str:
    return f"{n_bytes / memory.GIB:.2f} GiB" if n_bytes >= memory.GIB / 10 else f"{n_bytes / 2**20:.2f} MiB"


def presets_table() -> str:
    header = ["preset", "family", "params", "vision params", "weights 16-bit", "weights AWQ 4-bit",
              "KV per token", "video tokens (preset clip)"]
    rows = []
    for name in presets.options("model"):
        model = presets.load_model(name)
        arch, family = model["arch"], model["family"]
        lm, vision = memory.param_counts(family, arch)
        awq = memory.weight_bytes(family, arch, "float16", "awq", arch.get("quant_bits") or 4,
                                  arch.get("quant_group_size") or 128)["total"]
        clip = f"{model['frames']}x{model['frame_width']}x{model['frame_height']}"
        rows.append([name, family, f"{(lm + vision) / 1e9:.3g} B", f"{vision / 1e6:.3g} M",
                     _size(memory.weight_bytes(family, arch, "bfloat16")["total"]), _size(awq), f"{memory.arch_kv_bytes_per_token(arch, 'bfloat16') / 1024:g} KiB",
                     f"{memory.vision_tokens(family, arch, model['frames'], model['frame_width'], model['frame_height'])}"
                     f" ({clip})"])
    return markdown_table(header, rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m quant.cli", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plan", help="print one plan as JSON")
    p.add_argument("--model", required=True, choices=presets.options("model"))
    p.add_argument("--gpu", required=True, choices=presets.tiers())
    p.add_argument("--quant", default="auto", choices=presets.options("quant"))
    p.add_argument("--priority", choices=("quality", "memory"))
    p.add_argument("--checkpoint", help="pre-quantized checkpoint for quant=awq/gptq")
    p.add_argument("--engine", default="vllm", choices=("vllm", "hf"))
    p.add_argument("--frames", type=int)
    p.add_argument("--width", type=int)
    p.add_argument("--height", type=int)
    p.add_argument("--max-new-tokens", type=int, help="default: the job's default sampling preset's")
    p.add_argument("--device-vram-gib", type=float, help="the real GPU's total memory, GiB, as nvidia-smi reports it (memory.total)")
    p.add_argument("--cap-to-tier", action="store_true", help="rehearse --gpu on a bigger device")
    t = sub.add_parser("table", help="print the tiers table (docs/tiers.md)")
    t.add_argument("--model", default="qwen2_5_vl_7b", choices=presets.options("model"))
    sub.add_parser("presets", help="print the model presets table")
    args = parser.parse_args(argv)
    try:
        if args.command == "plan":
            print(json.dumps(_plan(args), indent=2, ensure_ascii=False))
        elif args.command == "table":
            print(tiers_table(args.model), end="")
        else:
            print(presets_table(), end="")
    except PlanError as exc:
        print(f"plan refused: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
