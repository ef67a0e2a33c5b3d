"""Inference engines behind one interface (caption.engines.base.Engine), each built from the plan's
engine specification (caption.settings.engine_spec.EngineSpec)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from caption.engines.base import Engine
    from caption.settings.engine_spec import EngineSpec


def build_engine(spec: EngineSpec) -> Engine:
    """The engine `spec` names; heavy imports happen only here."""
    if spec.engine == "vllm":
        from caption.engines.vllm_engine import VllmEngine

        return VllmEngine(spec)
    if spec.engine == "hf":
        from caption.engines.hf_engine import HfEngine

        return HfEngine(spec)
    if spec.engine == "server":
        from caption.engines.server_engine import ServerEngine

        return ServerEngine(spec)
    raise ValueError(f"unknown engine {spec.engine!r}")
