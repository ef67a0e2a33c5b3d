"""GPU tiers, the quantization rule and a memory planner: memory and numbers, no videos, no models.

    from quant.plan import make_plan
    plan = make_plan(model_dict, gpu_dict, quant_dict, "vllm", video={"frames": 16, "width": 448, "height": 448})
    plan.raise_if_unfit(); vllm_kwargs = plan.vllm

Imports nothing from caption, video_io or eval.
"""

from quant.errors import PlanError

__all__ = ["PlanError"]
