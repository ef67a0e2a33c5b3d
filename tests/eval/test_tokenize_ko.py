"""Korean tokenization for METEOR (kiwi morphemes) and the whitespace tokenizer."""

import unicodedata

import pytest

from eval.tokenize_ko import KiwiTokenizer, WhitespaceTokenizer, get_tokenizer


def test_splits_eojeol_into_morphemes(kiwi_tokenizer):
    toks = kiwi_tokenizer.tokenize("남자가 공원에서 걷는다")
    assert toks[:4] == ["남자", "가", "공원", "에서"]
    assert "걷" in toks


def test_keeps_morpheme_forms_across_inflections(kiwi_tokenizer):
    # irregular ㄷ-verb: 걸었다 / 걷는다 both yield the stem form 걷
    assert kiwi_tokenizer.tokenize("길을 걸었다") == ["길", "을", "걷", "었", "다"]
    assert "걷" in kiwi_tokenizer.tokenize("길을 걷는다")
    assert kiwi_tokenizer.tokenize("보인다") == ["보이", "ᆫ다"]


def test_drops_punctuation_by_default(kiwi_tokenizer):
    toks = kiwi_tokenizer.tokenize("하늘, 구름! (바다) “파도”… ~ ^^")
    assert toks == ["하늘", "구름", "바다", "파도"]
    kept = KiwiTokenizer(keep_punct=True)
    kept._kiwi = kiwi_tokenizer.kiwi  # share the loaded model
    assert "," in kept.tokenize("하늘, 구름!") and "!" in kept.tokenize("하늘, 구름!")


def test_numbers_and_latin_are_kept_and_lowercased(kiwi_tokenizer):
    toks = kiwi_tokenizer.tokenize("CCTV 화면에 차 3대")
    assert "cctv" in toks and "3" in toks
    assert kiwi_tokenizer.tokenize("ＣＣＴＶ") == ["cctv"]  # NFKC full-width


def test_unicode_normalization_makes_nfd_equal_nfc(kiwi_tokenizer):
    text = "바닷가에 파도가 부서진다"
    nfd = unicodedata.normalize("NFD", text)
    assert nfd != text
    assert kiwi_tokenizer.tokenize(nfd) == kiwi_tokenizer.tokenize(text)


def test_empty_and_blank(kiwi_tokenizer):
    assert kiwi_tokenizer.tokenize("") == []
    assert kiwi_tokenizer(["", "  ", "..."]) == [[], [], []]
    assert kiwi_tokenizer([]) == []


def test_batch_equals_one_at_a_time(kiwi_tokenizer):
    texts = ["남자가 공원에서 걷는다.", "", "아이들이 축구를 한다!", "CCTV 화면", "비 오는 날"] * 3
    assert kiwi_tokenizer(texts) == [kiwi_tokenizer.tokenize(t) for t in texts]


def test_tokens_never_contain_whitespace(kiwi_tokenizer):
    for toks in kiwi_tokenizer(["New York 거리에서 사람들이 걷는다", "a  b\tc\n다"]):
        assert all(t and not any(ch.isspace() for ch in t) for t in toks)


def test_rejects_non_text(kiwi_tokenizer):
    with pytest.raises(TypeError):
        kiwi_tokenizer([None])


def test_whitespace_tokenizer_changes_nothing_but_splits():
    tok = WhitespaceTokenizer()
    assert tok(["A cat .  sat\tdown", ""]) == [["A", "cat", ".", "sat", "down"], []]
    assert tok.tokenize("남자 가 공원") == ["남자", "가", "공원"]


def test_get_tokenizer():
    assert isinstance(get_tokenizer("whitespace"), WhitespaceTokenizer)
    assert get_tokenizer("kiwi") is get_tokenizer("kiwi")
    with pytest.raises(ValueError, match="unknown tokenizer"):
        get_tokenizer("mecab")


def test_cache_returns_fresh_lists_and_same_tokens(kiwi_tokenizer):
    a = kiwi_tokenizer(["바닷가에 파도가 친다", "바닷가에 파도가 친다"])
    assert a[0] == a[1] and a[0] is not a[1]
    a[0].append("x")
    assert kiwi_tokenizer(["바닷가에 파도가 친다"])[0] == a[1]


def test_cache_is_bounded():
    tok = KiwiTokenizer(cache_size=2)
    tok._kiwi = get_tokenizer("kiwi").kiwi
    assert tok(["하늘", "구름", "바다"]) == [["하늘"], ["구름"], ["바다"]]
    assert len(tok._cache) <= 3
    tok(["숲"])
    assert len(tok._cache) == 1
