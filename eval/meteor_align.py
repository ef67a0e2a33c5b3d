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
    """One aligned span: ``ref[start:start+length]`` ~ ``hyp[mstart:mstart+mlength]``."""

    start: int  # reference position
    length: int
    mstart: int  # hypothesis position
    mlength: int
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
    next_ref = -1
    last_end = -1
    for m in matches:
        if last_end != -1 and (m.start != next_ref or m.mstart != last_end):
            chunks += 1
        next_ref = m.start + m.length
        last_end = m.mstart + m.mlength
    if last_end != -1:
        chunks += 1
    return chunks


# A partial alignment is a tuple, indexed by these constants.  Its first three
# fields are the ranking key; ``CHOSEN`` is a linked list (match, rest) of the
# matches picked by the search (fixed matches live in a shared array).
NEG_TOTAL, CHUNKS, DIST, M1, M2, IDX, LAST, USED1, USED2, CHOSEN = range(10)
_rank = itemgetter(NEG_TOTAL, CHUNKS, DIST)


def _candidates(hyp, ref, stages):
    cands: list[list[Match]] = [[] for _ in ref]
    cov1 = [0] * len(hyp)
    cov2 = [0] * len(ref)
    for s, stage in enumerate(stages):
        for j, i in stage.pairs(hyp, ref):
            cands[j].append(Match(j, 1, i, 1, s))
            cov1[i] += 1
            cov2[j] += 1
    return cands, cov1, cov2


def align(
    hyp: Sequence[str],
    ref: Sequence[str],
    stages: Sequence[Matcher] = (ExactMatcher(),),
    beam_size: int = DEFAULT_BEAM_SIZE,
    candidates: Callable | None = None,
) -> Alignment:
    """Align ``hyp`` to ``ref`` the way METEOR 1.5 does (see module docstring).

    ``candidates`` may replace the built-in candidate collection (it must
    return ``(cands, cov1, cov2)`` like ``_candidates``); it exists so that
    multi-word matchers can be plugged in without touching the search.
    """
    if list(hyp) == list(ref):
        stages = stages[:1]
    cands, cov1, cov2 = (candidates or _candidates)(hyp, ref, stages)
    weights = [st.search_weight for st in stages]
    n = len(ref)

    # Unambiguous matches are fixed before the search.
    fixed: list[Match | None] = [None] * n
    used1 = used2 = 0
    ambiguous = False
    for j in range(n):
        cj = cands[j]
        if not cj:
            continue
        if len(cj) == 1:
            m = cj[0]
            if all(cov2[k] == 1 for k in range(m.start, m.start + m.length)) and all(
                cov1[k] == 1 for k in range(m.mstart, m.mstart + m.mlength)
            ):
                fixed[j] = m
                used2 |= ((1 << m.length) - 1) << m.start
                used1 |= ((1 << m.mlength) - 1) << m.mstart
                continue
        ambiguous = True

    if not ambiguous:
        # Every candidate is fixed: the search has a single path.
        matches = [m for m in fixed if m is not None]
        return Alignment(hyp, ref, matches, count_chunks(matches))

    best = _beam_search(cands, fixed, used1, used2, weights, n, beam_size)
    chosen = []
    node = best[CHOSEN]
    while node is not None:
        chosen.append(node[0])
        node = node[1]
    matches = sorted([m for m in fixed if m is not None] + chosen, key=lambda m: m.start)
    return Alignment(hyp, ref, matches, count_chunks(matches))


def _beam_search(cands, fixed, used1, used2, weights, n, beam_size):
    paths = [(0, 0, 0, 0, 0, 0, -1, used1, used2, None)]
    for current in range(n + 1):
        paths.sort(key=_rank)
        if len(paths) > beam_size:
            del paths[beam_size:]
        nxt = []
        add = nxt.append
        bit = 1 << current
        for p in paths:
            neg, chunks, dist, m1, m2, idx, last, u1, u2, chosen = p
            if current == n:
                # Close the open chunk of a finished path.
                if last != -1:
                    p = (neg, chunks + 1, dist, m1, m2, idx, last, u1, u2, chosen)
                add(p)
                continue
            if u2 & bit:
                if current < idx:
                    add(p)  # inside a multi-word match taken earlier
                    continue
                m = fixed[idx]
                if m is None:
                    continue  # the reference drops such a path
                w = weights[m.stage]
                m1 = int(m1 + m.mlength * w)
                m2 = int(m2 + m.length * w)
                if last != -1 and m.mstart != last:
                    chunks += 1
                add(
                    (-(m1 + m2), chunks, dist + abs(m.start - m.mstart), m1, m2,
                     m.start + m.length, m.mstart + m.mlength, u1, u2, chosen)
                )
                continue
            for m in cands[current]:
                mask1 = ((1 << m.mlength) - 1) << m.mstart
                mask2 = ((1 << m.length) - 1) << m.start
                if u1 & mask1 or u2 & mask2:
                    continue
                w = weights[m.stage]
                n1 = int(m1 + m.mlength * w)
                n2 = int(m2 + m.length * w)
                c = chunks + 1 if (last != -1 and m.mstart != last) else chunks
                add(
                    (-(n1 + n2), c, dist, n1, n2, m.start + m.length, m.mstart + m.mlength,
                     u1 | mask1, u2 | mask2, (m, chosen))
                )
                # Reference quirk: the tried match's distance lands on the
                # path that continues without it.
                dist += abs(m.start - m.mstart)
            if last != -1:
                chunks += 1
            add((-(m1 + m2), chunks, dist, m1, m2, idx + 1, -1, u1, u2, chosen))
        if not nxt:
            # The reference warns and continues with its best path.
            nxt.append(paths[0])
        paths = nxt
    paths.sort(key=_rank)
    return paths[0]
