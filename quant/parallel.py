"""GPUs per machine: how many GPUs each engine spans (tensor parallelism) and how many engines run.

vLLM's offline `LLM` runs one engine over `tensor_parallel_size` GPUs and no longer takes
`data_parallel_size > 1`, so the GPUs left over are used by independent engines (replicas), which the
job's runner spreads clips over (caption/runners/ray.py). Fewer GPUs per engine is better when it fits:
no all-reduce per layer, and more replicas. So the planner takes the smallest power of two that leaves
KV cache for a full batch (the tier's max_num_seqs requests); with none, the smallest that fits at all.
"""

from __future__ import annotations

from typing import Any, Callable

from quant.errors import PlanError
from quant.tiers import Tier

LARGEST_TP = 64  # how far "how many GPUs would it need" looks


def _holds_full_batch(plan, tier: Tier) -> bool:
    return plan.fits and (plan.sequences_fit is None or plan.sequences_fit >= tier.max_num_seqs)


def smallest_tp(plan_for: Callable[[int], Any], tier: Tier, limit: int) -> tuple[int, Any] | None:
    """(tp, plan) for the smallest power of two <= limit holding a full batch; else the smallest that fits."""
    plans, tp = [], 1
    while tp <= limit:
        plans.append((tp, plan_for(tp)))
        if _holds_full_batch(plans[-1][1], tier):
            return plans[-1]
        tp *= 2
    return next(((tp, plan) for tp, plan in plans if plan.fits), None)


def _needs(plan_for, tier: Tier, model: dict) -> str:
    """"needs 2 GPUs with AWQ (model=..._awq) or 4 in bfloat16", from the same arithmetic."""
    from quant.presets import load_model, options

    parts: list[str] = []
    method = None
    found = smallest_tp(plan_for, tier, LARGEST_TP)
    if found is not None:
        method = (found[1].quantization or {}).get("method")
    awq = model.get("awq_preset")  # the 4-bit release of this checkpoint (conf/model/*.yaml)
    if method in (None, "none", "int8") and awq in options("model"):
        try:
            release = smallest_tp(lambda tp: plan_for(tp, preset=load_model(awq)), tier, LARGEST_TP)
        except PlanError:  # e.g. the release cannot run on this tier at all
            release = None
        if release is not None:
            parts.append(f"{release[0]} GPU{'s' if release[0] > 1 else ''} with AWQ (model={awq})")
    if found is not None and not parts:
        parts.append(f"{found[0]} GPUs in {found[1].dtype}")
    elif found is not None:
        parts.append(f"{found[0]} in {found[1].dtype}")
    if not parts:
        return ""
    return (f"with tensor parallelism it needs {' or '.join(parts)} ({tier.name}; set gpu.count, "
            f"now {tier.count})")


def choose_tensor_parallel(plan_for: Callable[..., Any], tier: Tier, model: dict):
    """The plan with the tensor_parallel_size to use (see the module doc); a refused plan says how many
    GPUs would do. `plan_for(tp)` plans engines of tp GPUs each; `plan_for(tp, preset=...)` another model."""
    if tier.tensor_parallel_size is not None:
        return plan_for(tier.tensor_parallel_size)
    if not tier.is_gpu:
        return plan_for(1)
    found = smallest_tp(plan_for, tier, tier.count)
    if found is not None:
        plan = found[1]
        if plan.engine != "vllm" and found[0] > 1:  # transformers' generate has no tensor parallelism
            return plan_for(1)
        return plan
    plan = plan_for(1)
    if plan.engine == "vllm":
        needs = _needs(plan_for, tier, model)
        if needs:
            plan.reasons.append(needs)
    return plan
