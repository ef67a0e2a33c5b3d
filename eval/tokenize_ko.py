"""Tokenizers for METEOR on Korean text.

METEOR 1.5 has no Korean resources; its language-independent mode matches
whole tokens exactly.  Korean words (eojeol) glue content morphemes to
particles and endings (``공원에서`` = ``공원`` + ``에서``), so whitespace tokens
would almost never match across paraphrases.  We therefore split text into
morphemes with Kiwi (``kiwipiepy`` + ``kiwipiepy-model``, offline).

What the ``kiwi`` tokenizer keeps, and why:

* **Unicode NFKC** first, so full-width/compatibility characters (``ＡＢＣ``,
  ``①``, ``…``) compare equal to their plain forms before analysis.
* **Morpheme forms, no POS tags.**  We keep Kiwi's morpheme form
  (``걸어`` -> ``걷`` + ``어``; ``보인다`` -> ``보이`` + ``ᆫ다``), which undoes
  irregular conjugation and contraction, so inflected variants share their
  stem token.  Tags are dropped because a tag disagreement (often a tagger
  error) should not block an otherwise identical match.
* **Punctuation and symbols are dropped** (Kiwi tags SF SP SS SSO SSC SE SO
  SW SB and emoji).  Caption punctuation is style, not content: a final
  period would be a free match in every pair and splits chunks.  Numbers
  (SN), Latin words (SL), Hanja (SH), URLs/hashtags etc. are kept.
  ``keep_punct=True`` keeps them.
* **Lowercased** (Latin letters only matter): ``CCTV`` == ``cctv``.
* Tokens never contain whitespace (internal spaces are removed).

The ``whitespace`` tokenizer means the text is already tokenized: it only
splits on whitespace and changes nothing else (no case folding, punctuation
stays), like ``meteor-1.5.jar -l other`` without ``-lower``/``-norm``.  (It
splits on any Unicode whitespace; the jar splits only on space, tab, CR, LF
and form feed, so e.g. an ideographic space U+3000 would stay inside a jar
token.)

Kiwi is created lazily on first use (about 3 s including its first analysis,
which finishes loading the model) and shared; lists of texts
are analysed in one batched call (``num_workers=2``).  Results are kept in an
in-process cache (by normalized text), so duplicate texts and references
scored again (e.g. every epoch through the ``evaluate`` module) are analysed
once.
"""

from __future__ import annotations

import threading
import unicodedata
from typing import Callable, Iterable, Sequence

__all__ = ["KiwiTokenizer", "WhitespaceTokenizer", "get_tokenizer", "TOKENIZERS", "PUNCT_TAGS"]

#: Kiwi tags treated as punctuation/symbols and dropped by default.
PUNCT_TAGS = frozenset({"SF", "SP", "SS", "SSO", "SSC", "SE", "SO", "SW", "SB", "W_EMOJI"})


class WhitespaceTokenizer:
    """Already-tokenized text: split on whitespace, nothing else."""

    name = "whitespace"

    def __call__(self, texts: Sequence[str]) -> list[list[str]]:
        return [t.split() for t in texts]

    def tokenize(self, text: str) -> list[str]:
        return text.split()

    def load(self) -> None:
        """Nothing to load."""


class KiwiTokenizer:
    """Korean morpheme tokenizer (see the module docstring for the choices)."""

    name = "kiwi"

    def __init__(
        self,
        keep_punct: bool = False,
        lowercase: bool = True,
        normalization: str | None = "NFKC",
        num_workers: int = 2,
        cache_size: int = 200_000,
    ):
        self.keep_punct = keep_punct
        self.lowercase = lowercase
        self.normalization = normalization
        self.num_workers = num_workers
        self.cache_size = cache_size
        self._cache: dict[str, tuple[str, ...]] = {}  # normalized text -> tokens
        self._kiwi = None
        self._lock = threading.Lock()

    @property
    def kiwi(self):
        if self._kiwi is None:
            with self._lock:
                if self._kiwi is None:
                    try:
                        from kiwipiepy import Kiwi
                    except ImportError as exc:  # pragma: no cover - env problem
                        raise RuntimeError(
                            "the kiwi tokenizer needs kiwipiepy and kiwipiepy-model "
                            "(pip install kiwipiepy kiwipiepy-model)"
                        ) from exc
                    kiwi = Kiwi(num_workers=self.num_workers)
                    kiwi.tokenize("가")  # the first analysis finishes loading the model (~2 s)
                    self._kiwi = kiwi
        return self._kiwi

    def load(self) -> None:
        """Load the Kiwi model now (otherwise on first use)."""
        _ = self.kiwi

    def _prepare(self, text: str) -> str:
        if not isinstance(text, str):
            raise TypeError(f"expected text, got {type(text).__name__}")
        if self.normalization:
            text = unicodedata.normalize(self.normalization, text)
        return text

    def _tokens(self, analysed) -> list[str]:
        out = []
        for tok in analysed:
            if not self.keep_punct and tok.tag in PUNCT_TAGS:
                continue
            form = "".join(tok.form.split())
            if not form:
                continue
            out.append(form.lower() if self.lowercase else form)
        return out

    def tokenize(self, text: str) -> list[str]:
        text = self._prepare(text)
        return self._tokens(self.kiwi.tokenize(text)) if text.strip() else []

    def __call__(self, texts: Sequence[str]) -> list[list[str]]:
        prepared = [self._prepare(t) for t in texts]
        cache = self._cache
        todo = list(dict.fromkeys(t for t in prepared if t.strip() and t not in cache))
        if todo:
            kiwi = self.kiwi
            if len(todo) > 1 and self.num_workers > 1:
                analysed: Iterable = kiwi.tokenize(todo)
            else:
                analysed = (kiwi.tokenize(t) for t in todo)
            if len(cache) + len(todo) > self.cache_size:
                cache.clear()
            for t, toks in zip(todo, analysed):
                cache[t] = tuple(self._tokens(toks))
        return [list(cache[t]) if t.strip() else [] for t in prepared]


TOKENIZERS: dict[str, Callable[[], Callable[[Sequence[str]], list[list[str]]]]] = {
    "kiwi": KiwiTokenizer,
    "whitespace": WhitespaceTokenizer,
}
_shared: dict[str, object] = {}


def get_tokenizer(name: str = "kiwi"):
    """Shared tokenizer instance by name (``kiwi`` or ``whitespace``)."""
    if name not in TOKENIZERS:
        raise ValueError(f"unknown tokenizer {name!r}; choose one of {sorted(TOKENIZERS)}")
    if name not in _shared:
        _shared[name] = TOKENIZERS[name]()
    return _shared[name]
