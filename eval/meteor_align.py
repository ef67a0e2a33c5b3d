"""METEOR 1.5 matcher stages and alignment search, in plain Python.

This is an independent re-implementation written from a reading of METEOR 1.5
(Denkowski & Lavie, 2014; reference implementation ``meteor-1.5.jar``).  The
behaviour it reproduces, in the reference's own terms:

* ``hyp`` is METEOR's "line 1" (the test sentence), ``ref`` its "line 2".
* Each matcher stage proposes candidate 1-to-1 word matches.  Candidates are
  collected per reference position ``j``; stage 0 first, then stage 1, ...;
  within a stage in increasing hypothesis position ``i``.  Later stages only
  propose pairs of *different* words (exact matching is the first stage).
* A candidate that is the only one at its reference position, and whose words
  are covered by no other candidate on either side, is fixed up front.
* The remaining choices are made by a left-to-right beam search over reference
  positions (beam 40).  Partial alignments are ranked by (1) most matched words
  counted on both sides, each match weighted by its stage's *search weight*
  (1.0 for exact, 0.5 for every other stage) with the running per-side totals
  truncated to integers after each addition, as the reference does;
  (2) fewest chunks; (3) smallest summed |i - j| distance.  The sort is stable,
  so exact ties keep the order in which partial alignments were created
  (for each surviving path in rank order: one extension per candidate, in
  candidate order, then the "skip this position" path).
* A quirk of the reference is kept on purpose because it decides ties: when a
  path branches at a position, the distance of each candidate it tried is
  added to the path that goes on *without* a match there (the "skip" path),
  and each later branch starts from that accumulated distance.
* If hypothesis and reference are identical token lists, only the first stage
  is run.

Only word-to-word stages are supported (exact, stem, synonym; new ones
subclass :class:`Matcher`).  METEOR's multi-word paraphrase stage, which has
English tables only, is not implemented; the search relies on every match
covering one word on each side.

Tokens are compared as Python strings.  (The jar compares 32-bit Java string
hashes, so it would also match two different words whose hashes collide; that
is the only intended difference.)
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter
from typing import Callable, Hashable, Iterable, Sequence

__all__ = [
    "Match",
    "Matcher",
    "ExactMatcher",
    "StemMatcher",
    "SynonymMatcher",
    "Alignment",
    "align",
    "count_chunks",
]

DEFAULT_BEAM_SIZE = 40


@dataclass(frozen=True, slots=True)
class Match:
    """One aligned word pair: ``ref[start]`` ~ ``hyp[mstart]``."""

    start: int  # reference position
    mstart: int  # hypothesis position
    stage: int  # index of the matcher stage that proposed it


class Matcher:
    """A matcher stage.  Subclasses yield ``(j, i)`` pairs (reference, hypothesis)."""

    name = "matcher"
    #: weight of this stage's matches while *searching* for the best alignment
    #: (the reference uses 1.0 for exact and 0.5 for all other stages; the
    #: scoring weights are separate, see ``MeteorParams.weights``)
    search_weight = 0.5

    def pairs(self, hyp: Sequence[str], ref: Sequence[str]) -> Iterable[tuple[int, int]]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class ExactMatcher(Matcher):
    """Identical tokens."""

    name = "exact"
    search_weight = 1.0

    def pairs(self, hyp, ref):
        positions: dict[str, list[int]] = {}
        for i, w in enumerate(hyp):
            positions.setdefault(w, []).append(i)
        for j, w in enumerate(ref):
            for i in positions.get(w, ()):
                yield j, i


class StemMatcher(Matcher):
    """Different tokens with the same stem; ``stem`` is any ``str -> str``."""

    name = "stem"

    def __init__(self, stem: Callable[[str], str]):
        self.stem = stem

    def pairs(self, hyp, ref):
        hs = [self.stem(w) for w in hyp]
        rs = [self.stem(w) for w in ref]
        for j, (rw, r) in enumerate(zip(ref, rs)):
            for i, (hw, h) in enumerate(zip(hyp, hs)):
                if h == r and hw != rw:
                    yield j, i


class SynonymMatcher(Matcher):
    """Different tokens sharing a synonym set; ``synsets`` maps a token to set ids."""

    name = "synonym"

    def __init__(self, synsets: Callable[[str], Iterable[Hashable]]):
        self.synsets = synsets

    def pairs(self, hyp, ref):
        hs = [frozenset(self.synsets(w)) for w in hyp]
        rs = [frozenset(self.synsets(w)) for w in ref]
        for j, (rw, r) in enumerate(zip(ref, rs)):
            for i, (hw, h) in enumerate(zip(hyp, hs)):
                if hw != rw and not h.isdisjoint(r):
                    yield j, i


@dataclass(slots=True)
class Alignment:
    """The chosen alignment of one hypothesis/reference pair."""

    hyp: Sequence[str]
    ref: Sequence[str]
    matches: list[Match]  # sorted by reference position
    chunks: int


def count_chunks(matches: Sequence[Match]) -> int:
    """Chunks of a match list sorted by reference position: maximal runs that are
    contiguous in the reference and contiguous, in order, in the hypothesis."""
    chunks = 0
    prev = None
    for m in matches:
        if prev is None or m.start != prev.start + 1 or m.mstart != prev.mstart + 1:
            chunks += 1
        prev = m
    return chunks


# A partial alignment is a tuple (-matched, chunks, distance, matched, last,
# used, chosen): the first three fields are the ranking key; ``matched`` is
# the search-weighted match count of one side (both sides grow alike for
# word-to-word matches); ``last`` is one past the hypothesis position of the
# previous match, -1 after a gap; ``used`` is a bit set of used hypothesis
# positions; ``chosen`` a linked list (match, rest) of the matches picked by
# the search (fixed matches live in a shared array).
_rank = itemgetter(0, 1, 2)
_CHOSEN = 6


def _candidates(hyp, ref, stages):
    cands: list[list[Match]] = [[] for _ in ref]
    cov1 = [0] * len(hyp)
    cov2 = [0] * len(ref)
    for s, stage in enumerate(stages):
        for j, i in stage.pairs(hyp, ref):
            cands[j].append(Match(j, i, s))
            cov1[i] += 1
            cov2[j] += 1
    return cands, cov1, cov2


def align(
    hyp: Sequence[str],
    ref: Sequence[str],
    stages: Sequence[Matcher] = (ExactMatcher(),),
    beam_size: int = DEFAULT_BEAM_SIZE,
) -> Alignment:
    """Align ``hyp`` to ``ref`` the way METEOR 1.5 does (see module docstring)."""
    if list(hyp) == list(ref):
        stages = stages[:1]
    cands, cov1, cov2 = _candidates(hyp, ref, stages)
    n = len(ref)

    # Unambiguous matches are fixed before the search.
    fixed: list[Match | None] = [None] * n
    used = 0
    ambiguous = False
    for j in range(n):
        cj = cands[j]
        if not cj:
            continue
        if len(cj) == 1 and cov2[j] == 1 and cov1[cj[0].mstart] == 1:
            fixed[j] = cj[0]
            used |= 1 << cj[0].mstart
        else:
            ambiguous = True

    if not ambiguous:
        # Every candidate is fixed: the search has a single path.
        matches = [m for m in fixed if m is not None]
        return Alignment(hyp, ref, matches, count_chunks(matches))

    weights = [st.search_weight for st in stages]
    best = _beam_search(cands, fixed, used, weights, n, beam_size)
    matches = [m for m in fixed if m is not None]
    node = best[_CHOSEN]
    while node is not None:
        matches.append(node[0])
        node = node[1]
    matches.sort(key=lambda m: m.start)
    return Alignment(hyp, ref, matches, count_chunks(matches))


def _beam_search(cands, fixed, used, weights, n, beam_size):
    paths = [(0, 0, 0, 0, -1, used, None)]
    for j in range(n + 1):
        paths.sort(key=_rank)
        if len(paths) > beam_size:
            del paths[beam_size:]
        if j == n:
            break
        nxt = []
        add = nxt.append
        fm = fixed[j]
        cj = cands[j]
        if fm is not None:
            # A fixed match: every path takes it.
            w = weights[fm.stage]
            i = fm.mstart
            d = abs(j - i)
            for _neg, chunks, dist, m, last, u, chosen in paths:
                m = int(m + w)
                if last != -1 and last != i:
                    chunks += 1
                add((-m, chunks, dist + d, m, i + 1, u, chosen))
        elif not cj:
            # Nothing to match here: every path skips, closing its chunk.
            for p in paths:
                if p[4] == -1:
                    add(p)
                else:
                    neg, chunks, dist, m, last, u, chosen = p
                    add((neg, chunks + 1, dist, m, -1, u, chosen))
        else:
            opts = [(mt, mt.mstart, 1 << mt.mstart, weights[mt.stage], abs(j - mt.mstart)) for mt in cj]
            for neg, chunks, dist, m, last, u, chosen in paths:
                for mt, i, bit, w, d in opts:
                    if u & bit:
                        continue
                    k = int(m + w)
                    add((-k, chunks + 1 if (last != -1 and last != i) else chunks, dist, k, i + 1,
                         u | bit, (mt, chosen)))
                    # Reference quirk: the tried match's distance lands on the
                    # path that continues without it.
                    dist += d
                add((neg, chunks + 1 if last != -1 else chunks, dist, m, -1, u, chosen))
        paths = nxt
    # Close the open chunk of each finished path, then rank once more.
    paths = [p if p[4] == -1 else (p[0], p[1] + 1) + p[2:] for p in paths]
    paths.sort(key=_rank)
    return paths[0]
