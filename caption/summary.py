"""Counting what a job did, the progress bar, and the end-of-job summary (printed and saved)."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class JobTally:
    videos_found: int = 0
    videos_skipped: int = 0  # already had records (resume)
    videos_todo: int = 0
    requests_ok: int = 0
    requests_error: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    decode_s: float = 0.0
    failures: dict[str, str] = field(default_factory=dict)  # video -> first error
    started: float = field(default_factory=time.perf_counter)
    generation_started: float | None = None
    _bar: object = None

    def start_progress(self, total: int, enabled: bool) -> None:
        if enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit="caption", desc="captioning", file=sys.stderr,
                             dynamic_ncols=True, smoothing=0.1)

    def count(self, record: dict) -> None:
        if record["status"] == "ok":
            self.requests_ok += 1
            self.prompt_tokens += record.get("prompt_tokens") or 0
            self.output_tokens += record.get("output_tokens") or 0
        else:
            self.requests_error += 1
            self.failures.setdefault(record["video"], record.get("error") or "unknown error")
        if self._bar is not None:
            self._bar.update(1)
            if self.requests_error:
                self._bar.set_postfix(failed=self.requests_error, refresh=False)

    def close_progress(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def summary(self, job, engine_stats: dict) -> dict:
        now = time.perf_counter()
        gen_wall = now - (self.generation_started or self.started)
        videos_run = self.videos_todo
        return {
            "model": job.model.name, "engine": job.engine, "gpu": job.gpu.get("name"),
            "tasks": list(job.tasks), "output": str(job.output),
            "videos_found": self.videos_found, "videos_skipped_resume": self.videos_skipped,
            "videos_run": videos_run, "videos_failed": len(self.failures),
            "captions_ok": self.requests_ok, "captions_failed": self.requests_error,
            "wall_s": round(now - self.started, 2), "generation_wall_s": round(gen_wall, 2),
            "videos_per_s": round(videos_run / gen_wall, 3) if gen_wall > 0 else None,
            "output_tokens": self.output_tokens, "prompt_tokens": self.prompt_tokens,
            "output_tokens_per_s": round(self.output_tokens / gen_wall, 1) if gen_wall > 0 else None,
            "decode_s_total": round(self.decode_s, 2),
            **engine_stats,
            "failures": [{"video": v, "error": e} for v, e in sorted(self.failures.items())],
        }


def print_summary(summary: dict, path: Path, out=sys.stdout) -> None:
    rows = [(k, v) for k, v in summary.items() if k not in ("failures", "plan_warnings") and v is not None]
    width = max(len(k) for k, _ in rows)
    print("\n== caption job summary ==", file=out)
    for key, value in rows:
        print(f"  {key:<{width}}  {value}", file=out)
    failures = summary["failures"]
    if failures:
        print(f"  {len(failures)} video(s) failed (their records have status=error):", file=out)
        for item in failures[:20]:
            print(f"    - {item['video']}: {item['error']}", file=out)
        if len(failures) > 20:
            print(f"    ... and {len(failures) - 20} more in {path}", file=out)
    print(f"  summary saved to {path}", file=out)


def save_summary(summary: dict, path: Path) -> None:
    Path(path).write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def reset_peak_rss() -> None:
    """Start a new peak-memory measurement for this process (Linux: clear_refs 5 resets VmHWM),
    so each job of an in-process sweep reports its own peak."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_rss_gib() -> float:
    """Peak resident memory of this process since reset_peak_rss() (the engine lives here on CPU;
    decoders are separate processes), in GiB."""
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2**20  # kB
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def print_plan(plan: dict, path: Path | None, out=sys.stdout) -> None:
    memory = plan["memory_gib"]
    q = plan["quantization"]
    if not q:  # refused before any setting could be worked out
        rows = [("model", plan["model"]), ("tier", plan["tier"]), ("engine", plan["engine"]),
                ("fits", "NO: " + " ".join(plan["reasons"]))]
        _print_rows("plan", rows, path, out)
        return
    rows = [
        ("model", f"{plan['model']} ({plan['family']})"), ("tier", plan["tier"]),
        ("engine", f"{plan['engine']} ({plan['engine_reason']})"), ("dtype", plan["dtype"]),
        ("quantization", f"{q['method']}{'' if q['bits'] is None else ' %s-bit' % q['bits']} ({q['why']})"),
        ("engine settings", plan["vllm"] if plan["vllm"] is not None else plan["hf"]),
        ("video tokens per clip", plan["vision_tokens_per_clip"]),
        ("tokens per request", plan["tokens_per_request"]),
        ("memory (GiB)", ", ".join(f"{k} {v}" for k, v in memory.items() if v is not None)),
        ("fits", f"{'yes' if plan['fits'] else 'NO'}: {' '.join(plan['reasons'])}"),
    ]
    rows += [("warning", w) for w in plan["warnings"]]
    _print_rows("plan", rows, path, out)


def _print_rows(title: str, rows: list, path: Path | None, out) -> None:
    width = max(len(k) for k, _ in rows)
    print(f"\n== {title} ==", file=out)
    for key, value in rows:
        print(f"  {key:<{width}}  {value}", file=out)
    if path is not None:
        print(f"  {title} saved to {path}", file=out)
