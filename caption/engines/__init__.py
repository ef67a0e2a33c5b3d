"""Inference engines behind one interface (caption.engines.base.Engine)."""

from __future__ import annotations


def build_engine(job, stop: tuple[str, ...]):
    """The engine the job's config names; heavy imports happen only here."""
    if job.engine == "vllm":
        from caption.engines.vllm_engine import VllmEngine

        return VllmEngine(job, stop)
    if job.engine == "hf":
        from caption.engines.hf_engine import HfEngine

        return HfEngine(job, stop)
    raise ValueError(f"unknown engine {job.engine!r}")
