"""The evaluate-compatible module loads offline from the folder and gives the
same numbers as the plain function API (it calls it)."""

import json
import os
import subprocess
import sys
from pathlib import Path

from eval.meteor import meteor_score
from eval.meteor_ko import module_path

ROOT = Path(__file__).resolve().parents[2]
PREDS = ["a b c", "x y", ""]
REFS = [["a b c", "z"], ["y x q"], ["p"]]

# evaluate imports transformers.pipelines, which imports torchvision when it is
# installed; the metric needs neither, and a torchvision built for another
# torch build fails at import.  Hiding it keeps this test about the metric.
SCRIPT = """
import json, sys
sys.modules["torchvision"] = None
import evaluate
m = evaluate.load(sys.argv[1])
out = m.compute(predictions=json.loads(sys.argv[2]), references=json.loads(sys.argv[3]), tokenizer="whitespace")
single = m.compute(predictions=["a b"], references=["a b"], tokenizer="whitespace", return_segments=False)
print(json.dumps({"out": out, "single": single, "name": type(m).__name__, "bases": [c.__name__ for c in type(m).__mro__]}))
"""


def test_module_is_a_thin_adapter():
    src = (Path(module_path()) / "meteor_ko.py").read_text(encoding="utf-8")
    assert "from eval.meteor import meteor_score" in src
    assert "def align" not in src and "compute_metrics" not in src


def test_evaluate_load_from_local_folder_offline(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1",
               HF_EVALUATE_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, module_path(), json.dumps(PREDS), json.dumps(REFS)],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "Metric" in got["bases"] and got["name"] == "MeteorKo"
    expected = meteor_score(PREDS, REFS, tokenizer="whitespace")
    assert got["out"] == json.loads(json.dumps(expected))
    assert got["single"]["meteor"] == 1.0 and "segment_scores" not in got["single"]
