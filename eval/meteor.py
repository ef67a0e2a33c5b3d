"""METEOR 1.5 scoring (segment and corpus level) for pre-tokenized text.

Independent Python implementation of METEOR 1.5 (Denkowski & Lavie, 2014),
checked for parity against ``meteor-1.5.jar -l other`` (see
``tests/eval/test_meteor_parity.py``).  The alignment search lives in
``eval.meteor_align``; this module turns alignments into METEOR's sufficient
statistics and scores.

Per hypothesis/reference pair, with P/R computed from function-word-weighted
counts (``delta`` for content words, ``1 - delta`` for function words) and
stage weights ``w_s``::

    P = sum_s w_s (delta*hc_s + (1-delta)*hf_s) / (delta*|hyp content| + (1-delta)*|hyp function|)
    R = same with the reference side
    Fmean = 1 / ((1 - alpha)/P + alpha/R)
    frag = chunks / ((matched hyp words + matched ref words) / 2), 0 for a perfect match
    penalty = gamma * frag**beta
    score = Fmean * (1 - penalty), 0 when undefined (e.g. empty hypothesis)

With several references the first reference with the highest score is kept.
The corpus score is *not* a mean of segment scores: the kept statistics of
all segments are summed (chunks of perfectly matched segments are left out of
the sum, as in the reference) and the formula above is applied once.

``MeteorParams()`` is METEOR's language-independent setting (``-l other``):
alpha=0.75 beta=1.40 gamma=0.70 delta=0.50, exact matching only, weight 1.0,
no function words.  Text is compared as given (no lowercasing or punctuation
handling, like the jar without ``-lower``/``-norm``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from eval.meteor_align import Alignment, ExactMatcher, Matcher, align

__all__ = [
    "MeteorParams",
    "MeteorStats",
    "SegmentResult",
    "CorpusResult",
    "Scorer",
    "compute_metrics",
    "meteor_score",
]

_NAN = float("nan")


def _div(a: float, b: float) -> float:
    """IEEE division as in Java: x/0 is +-inf, 0/0 and nan/0 are nan."""
    if b == 0.0:
        if a == 0.0 or a != a:
            return _NAN
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


@dataclass(frozen=True)
class MeteorParams:
    """Scoring parameters.  Defaults: METEOR 1.5 language-independent set."""

    alpha: float = 0.75
    beta: float = 1.40
    gamma: float = 0.70
    delta: float = 0.50
    stages: tuple[Matcher, ...] = (ExactMatcher(),)
    weights: tuple[float, ...] = (1.0,)  # scoring weight per stage
    function_words: frozenset[str] = frozenset()
    beam_size: int = 40

    def __post_init__(self):
        if len(self.weights) != len(self.stages):
            raise ValueError("MeteorParams: need exactly one weight per matcher stage")
        if not isinstance(self.function_words, frozenset):
            object.__setattr__(self, "function_words", frozenset(self.function_words))

    def with_(self, **changes) -> "MeteorParams":
        return replace(self, **changes)


@dataclass
class MeteorStats:
    """METEOR sufficient statistics (summable) plus the derived scores."""

    test_len: float = 0.0
    ref_len: float = 0.0
    test_func: float = 0.0
    ref_func: float = 0.0
    # per stage: matched content/function words on the hypothesis/reference side
    test_content: list[float] = field(default_factory=list)
    ref_content: list[float] = field(default_factory=list)
    test_function: list[float] = field(default_factory=list)
    ref_function: list[float] = field(default_factory=list)
    chunks: float = 0.0
    test_matched: float = 0.0  # matched words (for fragmentation)
    ref_matched: float = 0.0
    # derived by compute_metrics
    precision: float = 0.0
    recall: float = 0.0
    f1: float = 0.0
    fmean: float = 0.0
    frag_penalty: float = 0.0
    score: float = 0.0

    @property
    def perfect(self) -> bool:
        """Every word matched on both sides, in one chunk."""
        return (
            sum(self.test_content) + sum(self.test_function) == self.test_len
            and sum(self.ref_content) + sum(self.ref_function) == self.ref_len
            and self.chunks == 1
        )

    def add(self, other: "MeteorStats") -> None:
        """Accumulate ``other`` into this corpus total (scores are not summed)."""
        self.test_len += other.test_len
        self.ref_len += other.ref_len
        self.test_func += other.test_func
        self.ref_func += other.ref_func
        for name in ("test_content", "ref_content", "test_function", "ref_function"):
            mine, theirs = getattr(self, name), getattr(other, name)
            mine.extend([0.0] * (len(theirs) - len(mine)))
            for k, v in enumerate(theirs):
                mine[k] += v
        if not other.perfect:
            self.chunks += other.chunks
        self.test_matched += other.test_matched
        self.ref_matched += other.ref_matched

    def to_jar_string(self, max_stages: int = 4) -> str:
        """The 23 numbers of the jar's ``-ssOut``/stdio ``SCORE`` output."""
        vals = [self.test_len, self.ref_len, self.test_func, self.ref_func]
        for k in range(max_stages):
            if k < len(self.test_content):
                vals += [self.test_content[k], self.ref_content[k],
                         self.test_function[k], self.ref_function[k]]
            else:
                vals += [0.0, 0.0, 0.0, 0.0]
        vals += [self.chunks, self.test_matched, self.ref_matched]
        return " ".join(repr(float(v)) for v in vals)

    @classmethod
    def from_jar_string(cls, line: str, max_stages: int = 4) -> "MeteorStats":
        v = [float(x) for x in line.split()]
        if len(v) != 4 + 4 * max_stages + 3:
            raise ValueError(f"expected {4 + 4 * max_stages + 3} numbers, got {len(v)}")
        st = cls(v[0], v[1], v[2], v[3])
        for k in range(max_stages):
            a, b, c, d = v[4 + 4 * k: 8 + 4 * k]
            st.test_content.append(a)
            st.ref_content.append(b)
            st.test_function.append(c)
            st.ref_function.append(d)
        st.chunks, st.test_matched, st.ref_matched = v[-3:]
        return st


def compute_metrics(st: MeteorStats, params: MeteorParams) -> MeteorStats:
    """Fill precision/recall/fmean/penalty/score of ``st`` in place and return it."""
    a, b, g, d = params.alpha, params.beta, params.gamma, params.delta
    test_wlen = d * (st.test_len - st.test_func) + (1.0 - d) * st.test_func
    ref_wlen = d * (st.ref_len - st.ref_func) + (1.0 - d) * st.ref_func
    test_w = ref_w = 0.0
    for k, w in enumerate(params.weights):
        test_w += st.test_content[k] * w * d
    for k, w in enumerate(params.weights):
        ref_w += st.ref_content[k] * w * d
    for k, w in enumerate(params.weights):
        test_w += st.test_function[k] * w * (1.0 - d)
    for k, w in enumerate(params.weights):
        ref_w += st.ref_function[k] * w * (1.0 - d)
    p = _div(test_w, test_wlen)
    r = _div(ref_w, ref_wlen)
    st.precision, st.recall = p, r
    st.f1 = _div(2 * p * r, p + r)
    st.fmean = _div(1.0, _div(1.0 - a, p) + _div(a, r))
    if st.perfect:
        frag = 0.0
    else:
        frag = _div(st.chunks, (st.test_matched + st.ref_matched) / 2)
    st.frag_penalty = g * math.pow(frag, b)
    score = st.fmean * (1.0 - st.frag_penalty)
    st.score = 0.0 if score != score else max(score, 0.0)
    return st


def alignment_stats(al: Alignment, params: MeteorParams) -> MeteorStats:
    """Sufficient statistics of one alignment, scored."""
    fw = params.function_words
    nstages = len(params.stages)
    hyp_fw = [w.lower() in fw for w in al.hyp] if fw else [False] * len(al.hyp)
    ref_fw = [w.lower() in fw for w in al.ref] if fw else [False] * len(al.ref)
    tc, rc, tf, rf = ([0.0] * nstages for _ in range(4))
    for m in al.matches:
        if hyp_fw[m.mstart]:
            tf[m.stage] += 1
        else:
            tc[m.stage] += 1
        if ref_fw[m.start]:
            rf[m.stage] += 1
        else:
            rc[m.stage] += 1
    st = MeteorStats(
        float(len(al.hyp)), float(len(al.ref)), float(sum(hyp_fw)), float(sum(ref_fw)),
        tc, rc, tf, rf, float(al.chunks),
        float(sum(tc) + sum(tf)), float(sum(rc) + sum(rf)),
    )
    return compute_metrics(st, params)


@dataclass
class SegmentResult:
    stats: MeteorStats  # of the kept (best) reference
    best_ref: int  # index of that reference
    alignment: Alignment

    @property
    def score(self) -> float:
        return self.stats.score


@dataclass
class CorpusResult:
    segments: list[SegmentResult]
    total: MeteorStats  # aggregated statistics, scored

    @property
    def score(self) -> float:
        return self.total.score

    @property
    def segment_scores(self) -> list[float]:
        return [s.score for s in self.segments]

    def summary(self) -> dict:
        n = len(self.segments)
        t = self.total
        return {
            "meteor": t.score,
            "mean_segment_meteor": (sum(self.segment_scores) / n) if n else 0.0,
            "precision": _finite(t.precision),
            "recall": _finite(t.recall),
            "fmean": _finite(t.fmean),
            "fragmentation_penalty": _finite(t.frag_penalty),
            "chunks": t.chunks,
            "hyp_words": t.test_len,
            "ref_words": t.ref_len,
            "matched_hyp_words": t.test_matched,
            "matched_ref_words": t.ref_matched,
            "n": n,
        }


def _finite(x: float) -> float:
    return x if math.isfinite(x) else 0.0


class Scorer:
    """Scores token lists.  ``tokenizer`` (text -> tokens, batched) is used by
    :meth:`score_texts`; :meth:`segment` and :meth:`corpus` take tokens."""

    def __init__(self, params: MeteorParams | None = None, tokenizer=None):
        self.params = params or MeteorParams()
        self.tokenizer = tokenizer

    def segment(self, hyp: Sequence[str], refs: Sequence[Sequence[str]]) -> SegmentResult:
        if not refs:
            raise ValueError("METEOR needs at least one reference per segment")
        p = self.params
        best = None
        for k, ref in enumerate(refs):
            al = align(hyp, ref, p.stages, p.beam_size)
            st = alignment_stats(al, p)
            if best is None or st.score > best.stats.score:
                best = SegmentResult(st, k, al)
        return best

    def corpus(self, hyps: Sequence[Sequence[str]], refs: Sequence[Sequence[Sequence[str]]]) -> CorpusResult:
        if len(hyps) != len(refs):
            raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} reference lists")
        segs = [self.segment(h, r) for h, r in zip(hyps, refs)]
        return CorpusResult(segs, aggregate([s.stats for s in segs], self.params))

    def tokenize(self, predictions: Sequence[str], references: Sequence[Sequence[str] | str]):
        """Tokenize predictions and their references in one batch.

        ``references[k]`` is a list of reference strings (or one string) for
        ``predictions[k]``.  Returns ``(hyp_tokens, ref_tokens)``."""
        if len(predictions) != len(references):
            raise ValueError(f"{len(predictions)} predictions but {len(references)} reference lists")
        tok = _resolve_tokenizer(self.tokenizer)
        refs = [[r] if isinstance(r, str) else list(r) for r in references]
        toks = tok(list(predictions) + [r for rs in refs for r in rs])
        hyps = toks[: len(predictions)]
        pos = len(predictions)
        ref_toks = []
        for rs in refs:
            ref_toks.append(toks[pos: pos + len(rs)])
            pos += len(rs)
        return hyps, ref_toks

    def score_texts(self, predictions: Sequence[str], references: Sequence[Sequence[str] | str]) -> CorpusResult:
        """Tokenize with ``self.tokenizer`` and score (corpus + segments)."""
        return self.corpus(*self.tokenize(predictions, references))


def aggregate(stats: Sequence[MeteorStats], params: MeteorParams) -> MeteorStats:
    """Corpus statistics: summed sufficient statistics, scored once."""
    total = MeteorStats(
        test_content=[0.0] * len(params.stages), ref_content=[0.0] * len(params.stages),
        test_function=[0.0] * len(params.stages), ref_function=[0.0] * len(params.stages),
    )
    for st in stats:
        total.add(st)
    return compute_metrics(total, params)


def _resolve_tokenizer(tokenizer) -> Callable[[list[str]], list[list[str]]]:
    if tokenizer is None or isinstance(tokenizer, str):
        from eval.tokenize_ko import get_tokenizer

        return get_tokenizer(tokenizer or "kiwi")
    return tokenizer


def meteor_score(
    predictions: Sequence[str],
    references: Sequence[Sequence[str] | str],
    tokenizer: str | Callable = "kiwi",
    params: MeteorParams | None = None,
) -> dict:
    """Corpus METEOR of ``predictions`` against ``references`` (one list of
    reference strings per prediction, or one string).

    ``tokenizer``: ``"kiwi"`` (Korean morphemes, see ``eval.tokenize_ko``),
    ``"whitespace"`` (text is already tokenized), or a callable mapping a
    list of strings to a list of token lists.  Returns the corpus summary
    (``meteor`` is the corpus score) plus ``segment_scores``.
    """
    result = Scorer(params, tokenizer).score_texts(predictions, references)
    out = result.summary()
    out["segment_scores"] = result.segment_scores
    return out
