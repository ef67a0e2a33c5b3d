"""Edge cases of the METEOR implementation, with hand-computed expectations."""

import math

import pytest

from eval.meteor import MeteorParams, MeteorStats, Scorer, aggregate, compute_metrics, meteor_score
from eval.meteor_align import ExactMatcher, Match, StemMatcher, SynonymMatcher, align, count_chunks

A, B, G = 0.75, 1.40, 0.70  # language-independent parameters (delta 0.5)


def fmean(p, r, alpha=A):
    return p * r / (alpha * p + (1 - alpha) * r)


def seg(hyp, *refs, params=None):
    return Scorer(params).segment(hyp.split(), [r.split() for r in refs])


def test_identical_is_one():
    s = seg("a b c", "a b c")
    assert s.score == 1.0 and s.stats.chunks == 1 and s.stats.frag_penalty == 0.0


def test_empty_hypothesis_reference_or_both_score_zero():
    assert seg("", "a b").score == 0.0
    assert seg("a b", "").score == 0.0
    assert seg("", "").score == 0.0
    st = seg("", "a b").stats
    assert (st.test_len, st.ref_len, st.test_matched) == (0, 2, 0)


def test_no_overlap_scores_zero():
    s = seg("a b c", "d e f")
    assert s.score == 0.0 and s.stats.chunks == 0


def test_case_and_punctuation_are_literal():
    assert seg("Cat", "cat").score == 0.0
    assert seg("cat .", "cat").stats.test_len == 2


def test_hand_computed_gap():
    # 4 matches, ref has an extra word: 2 chunks over 4 matched words
    s = seg("a b c d", "a b x c d")
    expected = fmean(1.0, 0.8) * (1 - G * (2 / 4) ** B)
    assert s.score == pytest.approx(expected, abs=1e-12)
    assert s.stats.chunks == 2


def test_hand_computed_reordering():
    s = seg("b a", "a b")
    assert s.stats.chunks == 2
    assert s.score == pytest.approx(1.0 * (1 - G * 1.0), abs=1e-12)


def test_alignment_prefers_fewest_chunks():
    s = seg("a b c a b c", "a b c")
    assert s.stats.chunks == 1 and s.stats.test_matched == 3
    al = s.alignment
    assert [m.mstart for m in al.matches] in ([0, 1, 2], [3, 4, 5])


def test_repeated_words_match_at_most_once_each():
    s = seg("a a a", "a")
    assert (s.stats.test_matched, s.stats.ref_matched) == (1, 1)
    expected = fmean(1 / 3, 1.0) * (1 - G * (1 / 1) ** B)
    assert s.score == pytest.approx(expected, abs=1e-12)


def test_multi_reference_keeps_first_best():
    s = seg("a b c", "x y", "a b c", "a b c")
    assert s.best_ref == 1 and s.score == 1.0
    s = seg("a b", "b a", "a b x")
    # "b a": P = R = 1 but 2 chunks -> 0.3; "a b x": R = 2/3 in 1 chunk -> better
    assert s.best_ref == 1
    assert s.score == pytest.approx(fmean(1.0, 2 / 3) * (1 - G * 0.5 ** B), abs=1e-12)


def test_multi_reference_requires_a_reference():
    with pytest.raises(ValueError):
        Scorer().segment(["a"], [])


def test_corpus_sums_statistics_and_skips_chunks_of_perfect_segments():
    sc = Scorer()
    res = sc.corpus([["a", "b"], ["b", "a"]], [[["a", "b"]], [["a", "b"]]])
    # perfect segment's single chunk is not counted: 2 chunks / 4 matched words
    assert res.total.chunks == 2
    assert res.score == pytest.approx(1 - G * 0.5 ** B, abs=1e-12)
    assert res.score != pytest.approx(sum(res.segment_scores) / 2)
    assert sc.corpus([["a"], ["b"]], [[["a"]], [["b"]]]).score == 1.0


def test_corpus_with_empty_hypothesis_counts_its_reference_words():
    res = Scorer().corpus([["a", "b"], []], [[["a", "b"]], [["c", "d"]]])
    assert res.segment_scores == [1.0, 0.0]
    assert res.total.ref_len == 4
    assert res.score == pytest.approx(fmean(1.0, 0.5), abs=1e-12)  # one chunk, perfect -> frag 0


def test_function_word_weighting():
    p = MeteorParams(delta=0.75, function_words=frozenset({"the"}))
    s = seg("the cat", "the dog", params=p)
    # only "the" matches: weighted P = R = 0.25 / (0.75 + 0.25)
    assert s.stats.precision == pytest.approx(0.25)
    assert (s.stats.test_func, s.stats.test_function[0], s.stats.test_content[0]) == (1, 1, 0)
    assert s.score == pytest.approx(fmean(0.25, 0.25) * (1 - G * 1.0 ** B), abs=1e-12)
    # with delta 0.5 function words make no difference
    p5 = MeteorParams(function_words=frozenset({"the"}))
    assert seg("the cat", "the dog", params=p5).score == pytest.approx(seg("the cat", "the dog").score)


def test_parameters_and_module_weight():
    p = MeteorParams(alpha=0.9, beta=3.0, gamma=0.5, weights=(0.8,))
    s = seg("a b c d", "a b x c d", params=p)
    expected = fmean(0.8, 0.8 * 0.8, alpha=0.9) * (1 - 0.5 * 0.5 ** 3.0)
    assert s.score == pytest.approx(expected, abs=1e-12)


def test_stem_and_synonym_stages_with_weights():
    stem = StemMatcher(lambda w: w[:4])
    syn = SynonymMatcher(lambda w: {"big": {1}, "large": {1}}.get(w, ()))
    p = MeteorParams(stages=(ExactMatcher(), stem, syn), weights=(1.0, 0.6, 0.8))
    s = seg("walked big dog", "walking large dog", params=p)
    assert [m.stage for m in s.alignment.matches] == [1, 2, 0]
    st = s.stats
    assert st.test_content == [1, 1, 1] and st.chunks == 1
    w = (1.0 + 0.6 + 0.8) / 3
    # every word matched in one chunk: no fragmentation penalty
    assert s.score == pytest.approx(fmean(w, w), abs=1e-12)
    s = seg("dog walked", "walking dog", params=p)
    assert s.stats.chunks == 2
    w = (1.0 + 0.6) / 2
    assert s.score == pytest.approx(fmean(w, w) * (1 - G * 1.0 ** B), abs=1e-12)


def test_later_stages_skip_identical_words_and_identical_sentences():
    stem = StemMatcher(lambda w: w[:1])
    p = MeteorParams(stages=(ExactMatcher(), stem), weights=(1.0, 0.5))
    al = align("ab ac".split(), "ab ac".split(), p.stages)
    assert [m.stage for m in al.matches] == [0, 0]
    al = align("ab ax".split(), "ab ay".split(), p.stages)
    # "ab" is only an exact match (a stem candidate needs different words)
    assert sorted((m.start, m.mstart, m.stage) for m in al.matches) == [(0, 0, 0), (1, 1, 1)]


def test_count_chunks():
    m = lambda j, i: Match(j, i, 0)  # noqa: E731
    assert count_chunks([]) == 0
    assert count_chunks([m(0, 0), m(1, 1), m(2, 2)]) == 1
    assert count_chunks([m(0, 0), m(2, 1)]) == 2  # gap in the reference
    assert count_chunks([m(0, 0), m(1, 2)]) == 2  # gap in the hypothesis
    assert count_chunks([m(0, 1), m(1, 0)]) == 2  # crossing


def test_java_float_semantics_for_degenerate_stats():
    st = compute_metrics(MeteorStats(0, 0, 0, 0, [0.0], [0.0], [0.0], [0.0]), MeteorParams())
    assert math.isnan(st.precision) and st.score == 0.0
    st = compute_metrics(MeteorStats(2, 2, 0, 0, [0.0], [0.0], [0.0], [0.0]), MeteorParams())
    assert st.precision == 0.0 and st.fmean == 0.0 and st.score == 0.0


def test_jar_string_roundtrip():
    st = seg("a b c", "a x c").stats
    back = MeteorStats.from_jar_string(st.to_jar_string())
    assert back.to_jar_string() == st.to_jar_string()
    assert compute_metrics(back, MeteorParams()).score == st.score
    with pytest.raises(ValueError):
        MeteorStats.from_jar_string("1 2 3")


def test_aggregate_of_nothing_is_zero():
    assert aggregate([], MeteorParams()).score == 0.0


def test_params_validation():
    with pytest.raises(ValueError):
        MeteorParams(weights=(1.0, 0.5))


def test_meteor_score_function_api():
    out = meteor_score(["a b c", "x"], [["a b c", "a"], "y"], tokenizer="whitespace")
    assert out["segment_scores"] == [1.0, 0.0]
    assert out["n"] == 2 and 0 < out["meteor"] < 1
    out2 = meteor_score(["A B"], [["a b"]], tokenizer=lambda ts: [t.lower().split() for t in ts])
    assert out2["meteor"] == 1.0


def test_long_repetitive_input_is_fast_enough():
    import time

    hyp = ("a b " * 40).split()
    ref = ("b a " * 40).split()
    t = time.perf_counter()
    s = Scorer().segment(hyp, [ref])
    assert time.perf_counter() - t < 2.0
    assert s.stats.test_matched == 80
