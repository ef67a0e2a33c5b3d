"""Forced output lengths, for benchmarks only: every request generates exactly n tokens.

A random-weight model (caption-make-model) never says "stop" where a real one would, and a
trained one stops where it likes, differently per engine once the numbers drift. An engine
comparison needs both engines to produce the same amount of work, and work of realistic shape:
captions of varied lengths, which is what makes static batching (transformers) wait on its longest
row while continuous batching (vLLM) refills. So each request's length is drawn from a log-normal
(median, sigma), clipped to [min, max], deterministically from (seed, video, task, adapter): the
same request gets the same n on every engine, every run, in any order.

The engines force n themselves (caption/engines/vllm_engine.py, hf_engine.py): end-of-sequence and
stop tokens are suppressed until a request has n tokens, and generation stops there.
"""

from __future__ import annotations

import hashlib
import math
import struct
from dataclasses import dataclass


@dataclass(frozen=True)
class ForcedLengths:
    median: float
    sigma: float
    min: int
    max: int
    seed: int = 0

    @classmethod
    def from_config(cls, value: dict | None) -> "ForcedLengths | None":
        """`benchmark.output_tokens` as written in the config; ValueError says which key is wrong."""
        if value is None:
            return None
        unknown = set(value) - {"median", "sigma", "min", "max", "seed"}
        if unknown:
            raise ValueError(f"unknown key(s) {sorted(unknown)}; it takes median, sigma, min, max, seed")
        try:
            lengths = cls(median=float(value["median"]), sigma=float(value.get("sigma", 0.5)),
                          min=int(value.get("min", 1)), max=int(value["max"]), seed=int(value.get("seed", 0)))
        except KeyError as exc:
            raise ValueError(f"`{exc.args[0]}` is required, e.g. {{median: 40, sigma: 0.6, min: 8, max: 200}}") from None
        if not lengths.median > 0 or not lengths.sigma >= 0:
            raise ValueError(f"median must be > 0 and sigma >= 0, got median={lengths.median} sigma={lengths.sigma}")
        if not 1 <= lengths.min <= lengths.max:
            raise ValueError(f"need 1 <= min <= max, got min={lengths.min} max={lengths.max}")
        return lengths

    def draw(self, video: str, task: str, adapter: str | None, segment: int | None = None) -> int:
        """n for one request: two uniforms from a hash of the request's identity (a long video's segment
        is a request of its own), Box-Muller to a standard normal z, exp(ln(median) + sigma * z), rounded
        and clipped."""
        part = "" if segment is None else f"\x1f{segment}"
        digest = hashlib.sha256(f"{self.seed}\x1f{video}\x1f{task}\x1f{adapter or ''}{part}".encode("utf-8",
                                                                                                    "surrogateescape"))
        a, b = struct.unpack("<QQ", digest.digest()[:16])
        u1, u2 = (a + 1) / 2**64, b / 2**64  # u1 in (0, 1]: log(u1) is finite
        z = math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)
        n = round(math.exp(math.log(self.median) + self.sigma * z))
        return min(self.max, max(self.min, n))
