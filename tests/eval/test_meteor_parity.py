"""Parity with meteor-1.5.jar on golden files (no Java needed to run these).

The golden files were produced by ``python -m scripts.make_meteor_golden`` from the
jar in ``-stdio`` mode:
* ``meteor_other.json``: ``-l other`` (the setting used for Korean);
* ``meteor_other_fw.json``: ``-l other -p "0.85 0.2 0.6 0.75" -w 0.8`` with a
  function-word list, to exercise alpha/beta/gamma/delta, stage weights and
  function-word weighting with values where they change the score.

Print the max differences with:
    PYTHONPATH=. python -m pytest tests/eval/test_meteor_parity.py -k summary
"""

import json
from pathlib import Path

import pytest

from eval.meteor import MeteorParams, MeteorStats, Scorer

GOLDEN = Path(__file__).parent / "golden"
FILES = sorted(GOLDEN.glob("meteor_*.json"))
TOL = 0.005  # required; in practice the difference is 0 or a few ulps


def load(path):
    data = json.loads(path.read_text(encoding="utf-8"))
    c = data["config"]
    params = MeteorParams(
        alpha=c["alpha"], beta=c["beta"], gamma=c["gamma"], delta=c["delta"],
        weights=tuple(c["weights"]), function_words=frozenset(c["function_words"] or ()),
    )
    return data, params


def score_group(params, group):
    segs = group["segments"]
    return Scorer(params).corpus(
        [s["hyp"].split() for s in segs], [[r.split() for r in s["refs"]] for s in segs]
    )


def all_groups():
    for path in FILES:
        data, params = load(path)
        for g in data["groups"]:
            yield pytest.param(params, g, data["config"], id=f"{path.stem}-{g['name']}")


def test_golden_files_present_and_big_enough():
    assert {p.name for p in FILES} >= {"meteor_other.json", "meteor_other_fw.json"}
    data, _ = load(GOLDEN / "meteor_other.json")
    names = {g["name"] for g in data["groups"]}
    assert names >= {"exact_copies", "no_overlap", "reordered", "repeated_words", "empty_hypotheses",
                     "multi_reference", "punctuation", "single_words", "long", "korean_kiwi",
                     "tie_breaking", "fuzz"}
    assert sum(len(g["segments"]) for g in data["groups"]) >= 300


@pytest.mark.parametrize("params,group,config", list(all_groups()))
def test_parity(params, group, config):
    result = score_group(params, group)
    for seg, got in zip(group["segments"], result.segments):
        where = f"hyp={seg['hyp']!r} refs={seg['refs']!r}"
        assert got.score == pytest.approx(seg["score"], abs=TOL), where
        jar = MeteorStats.from_jar_string(seg["stats"])
        mine = got.stats
        # Lengths, matched words and chunks of the kept reference.
        assert (mine.test_len, mine.ref_len, mine.test_matched, mine.ref_matched, mine.chunks) == (
            jar.test_len, jar.ref_len, jar.test_matched, jar.ref_matched, jar.chunks), where
        if config["function_words"] is not None:
            # Same function-word list on both sides: every statistic agrees.
            assert mine.to_jar_string() == jar.to_jar_string(), where
        # (With plain "-l other" the jar counts English function words, a quirk
        # of its configuration; with delta=0.5 that cannot change any score.)
    assert result.score == pytest.approx(group["corpus"], abs=TOL)


def test_corpus_is_not_mean_of_segments():
    data, params = load(GOLDEN / "meteor_other.json")
    fuzz = next(g for g in data["groups"] if g["name"] == "fuzz")
    mean = sum(s["score"] for s in fuzz["segments"]) / len(fuzz["segments"])
    assert abs(mean - fuzz["corpus"]) > 0.01  # the golden data would catch a mean


def test_parity_summary(capsys):
    """Max |ours - jar| over all golden segments and corpora (always printed)."""
    lines = []
    for path in FILES:
        data, params = load(path)
        seg_diff = corp_diff = 0.0
        n = 0
        for g in data["groups"]:
            result = score_group(params, g)
            for seg, got in zip(g["segments"], result.segments):
                seg_diff = max(seg_diff, abs(got.score - seg["score"]))
                n += 1
            corp_diff = max(corp_diff, abs(result.score - g["corpus"]))
        lines.append(f"{path.name}: {n} segments, {len(data['groups'])} corpora, "
                     f"max|seg diff|={seg_diff:.3g}, max|corpus diff|={corp_diff:.3g}")
        assert seg_diff <= TOL and corp_diff <= TOL
    with capsys.disabled():
        print("\n" + "\n".join(lines))
