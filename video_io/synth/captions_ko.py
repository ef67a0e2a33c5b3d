"""Korean reference captions for synthetic clips: one canonical sentence and several paraphrases.

The canonical sentence (always first) names every attribute in a fixed order; it is what the
embedded model is trained to say. The paraphrases change word order, sentence shape, verbs and
synonyms, so METEOR against the reference set rewards naming the right things, not one template.
"""

from __future__ import annotations

import numpy as np

from video_io.synth.attributes import ClipAttributes

TIME = {"day": "낮", "sunset": "해질녘", "night": "밤"}
TIME_ALT = {
    "day": ("한낮의", "낮의", "밝은 낮의"),
    "sunset": ("해 질 무렵의", "노을 지는", "해질녘의"),
    "night": ("어두운 밤의", "깊은 밤의", "밤의"),
}
WEATHER_ADJ = {"clear": "맑은", "rain": "비 내리는", "snow": "눈 내리는"}
WEATHER_ADJ_ALT = {
    "clear": ("맑은", "화창한"),
    "rain": ("비 내리는", "비 오는"),
    "snow": ("눈 내리는", "눈 오는"),
}
WEATHER_CLAUSE = {
    "clear": ("하늘이 맑은 가운데", "맑은 날씨 속에"),
    "rain": ("비가 내리는 가운데", "빗속에서"),
    "snow": ("눈이 내리는 가운데", "눈발 속에서"),
}
PLACE = {"sky": "하늘에서", "sea": "바다 위에서", "city": "도시에서",
         "forest": "숲 위에서", "mountain": "산 위에서"}
SCENE_NOUN = {
    "sky": ("하늘",), "sea": ("바다", "바다 위"), "city": ("도시", "도심"),
    "forest": ("숲",), "mountain": ("산", "산 능선"),
}
OBJECT_NP = {"cloud": "구름 한 조각", "bird": "새 한 마리", "airplane": "비행기 한 대",
             "balloon": "열기구 하나", "car": "자동차 한 대", "boat": "배 한 척"}
OBJECT_NOUN = {"cloud": "구름", "bird": "새", "airplane": "비행기",
               "balloon": "열기구", "car": "자동차", "boat": "배"}
MOTION_VERB = {"cloud": ("흘러간다", "지나간다"), "bird": ("날아간다",), "airplane": ("날아간다",),
               "balloon": ("떠간다", "움직인다"), "car": ("달린다", "지나간다"),
               "boat": ("나아간다", "지나간다")}
VERTICAL_VERB = {"up": ("올라간다", "솟아오른다"), "down": ("내려간다", "내려온다")}
SPEED = {"slow": "천천히", "fast": "빠르게"}
SPEED_ALT = {"slow": ("천천히", "느리게", "느릿느릿"), "fast": ("빠르게", "재빠르게", "빠른 속도로")}
DIRECTION = {"left": "왼쪽으로", "right": "오른쪽으로", "up": "위로", "down": "아래로"}
DIRECTION_ALT = {
    "left": ("왼쪽으로", "화면 왼쪽으로", "좌측으로"),
    "right": ("오른쪽으로", "화면 오른쪽으로", "우측으로"),
    "up": ("위로", "위쪽으로", "하늘 높이"),
    "down": ("아래로", "아래쪽으로"),
}


def _has_final_consonant(word: str) -> bool:
    last = word.rstrip()[-1]
    return "가" <= last <= "힣" and (ord(last) - ord("가")) % 28 != 0


def subject(word: str) -> str:
    """Attach the subject particle 이/가 as Korean phonology requires."""
    return word + ("이" if _has_final_consonant(word) else "가")


def canonical_caption(a: ClipAttributes) -> str:
    """The one fixed-order sentence naming weather, time, scene, object, speed and direction."""
    return (f"{WEATHER_ADJ[a.weather]} {TIME[a.time]}의 {PLACE[a.scene]} "
            f"{subject(OBJECT_NP[a.object])} {SPEED[a.speed]} {DIRECTION[a.direction]} 움직인다.")


def _pick(rng: np.random.Generator, options: tuple[str, ...]) -> str:
    return options[rng.integers(len(options))]


def _verb(rng: np.random.Generator, a: ClipAttributes) -> str:
    if a.direction in VERTICAL_VERB:
        return _pick(rng, VERTICAL_VERB[a.direction])
    return _pick(rng, MOTION_VERB[a.object])


def _clause_first(rng, a):
    # "해 질 무렵의 바다, 비가 내리는 가운데 배 한 척이 오른쪽으로 천천히 나아간다."
    return (f"{_pick(rng, TIME_ALT[a.time])} {_pick(rng, SCENE_NOUN[a.scene])}, "
            f"{_pick(rng, WEATHER_CLAUSE[a.weather])} {subject(OBJECT_NP[a.object])} "
            f"{_pick(rng, DIRECTION_ALT[a.direction])} {_pick(rng, SPEED_ALT[a.speed])} {_verb(rng, a)}.")


def _object_first(rng, a):
    # "배 한 척이 비 오는 해질녘의 바다에서 빠르게 왼쪽으로 지나간다."
    return (f"{subject(OBJECT_NP[a.object])} {_pick(rng, WEATHER_ADJ_ALT[a.weather])} "
            f"{TIME[a.time]}의 {_pick(rng, SCENE_NOUN[a.scene])}에서 "
            f"{_pick(rng, SPEED_ALT[a.speed])} {_pick(rng, DIRECTION_ALT[a.direction])} {_verb(rng, a)}.")


def _noun_phrase(rng, a):
    # "천천히 왼쪽으로 움직이는 자동차가 보이는 비 오는 밤의 도시 풍경."
    return (f"{_pick(rng, SPEED_ALT[a.speed])} {_pick(rng, DIRECTION_ALT[a.direction])} 움직이는 "
            f"{subject(OBJECT_NOUN[a.object])} 보이는 {_pick(rng, WEATHER_ADJ_ALT[a.weather])} "
            f"{TIME[a.time]}의 {_pick(rng, SCENE_NOUN[a.scene])} 풍경.")


def _two_sentences(rng, a):
    # "눈 내리는 밤의 숲이다. 새 한 마리가 위쪽으로 빠르게 올라간다."
    return (f"{_pick(rng, WEATHER_ADJ_ALT[a.weather])} {_pick(rng, TIME_ALT[a.time])} "
            f"{_pick(rng, SCENE_NOUN[a.scene])} 풍경이다. {subject(OBJECT_NP[a.object])} "
            f"{_pick(rng, DIRECTION_ALT[a.direction])} {_pick(rng, SPEED_ALT[a.speed])} {_verb(rng, a)}.")


_PARAPHRASES = (_clause_first, _object_first, _noun_phrase, _two_sentences)


def reference_captions(a: ClipAttributes, rng: np.random.Generator, n: int = 4) -> list[str]:
    """The canonical caption followed by n-1 distinct paraphrases, reproducible from rng."""
    refs = [canonical_caption(a)]
    styles = list(rng.permutation(len(_PARAPHRASES)))
    tries = 0
    while len(refs) < n and tries < 50:
        sentence = _PARAPHRASES[styles[tries % len(styles)]](rng, a)
        if sentence not in refs:
            refs.append(sentence)
        tries += 1
    return refs


KEYWORD = {
    "time": TIME,
    "weather": {"clear": "맑음", "rain": "비", "snow": "눈"},
    "scene": {"sky": "하늘", "sea": "바다", "city": "도시", "forest": "숲", "mountain": "산"},
    "object": OBJECT_NOUN,
    "direction": {"left": "왼쪽", "right": "오른쪽", "up": "위", "down": "아래"},
    "speed": {"slow": "느림", "fast": "빠름"},
}


def keywords_answer(a: ClipAttributes) -> str:
    """Answer to the 'keywords' instruction: the attributes as comma-separated Korean words."""
    values = a.as_dict()
    return ", ".join(KEYWORD[k][values[k]] for k in ("time", "weather", "scene", "object", "direction", "speed"))


def motion_answer(a: ClipAttributes) -> str:
    """Answer to the 'motion' instruction: only what moves, where to and how fast."""
    return f"{subject(OBJECT_NP[a.object])} {SPEED[a.speed]} {DIRECTION[a.direction]} 움직인다."


TASK_ANSWERS = {"caption": canonical_caption, "keywords": keywords_answer, "motion": motion_answer}


# Words that name each attribute value in any caption style (checked in this order: more
# specific phrases first, so "바다 위에서" is a place, not the direction "위로").
_CUES: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "direction": (("left", ("왼쪽", "좌측")), ("right", ("오른쪽", "우측")),
                  ("up", ("위로", "위쪽", "하늘 높이", "올라", "솟아", ", 위,")), ("down", ("아래", "내려"))),
    "speed": (("slow", ("천천히", "느리게", "느릿느릿", "느림")), ("fast", ("빠르게", "빠른", "빠름"))),
    "object": (("cloud", ("구름",)), ("bird", ("새 ", "새가", "새,")), ("airplane", ("비행기",)),
               ("balloon", ("열기구",)), ("car", ("자동차",)), ("boat", ("배 ", "배가", "배,"))),
    "weather": (("rain", ("비 ", "비가", "빗속", "비,")), ("snow", ("눈 ", "눈이", "눈발", "눈,")),
                ("clear", ("맑은", "맑음", "화창한", "맑"))),
    "time": (("sunset", ("해질녘", "해 질", "노을")), ("night", ("밤",)), ("day", ("낮",))),
    "scene": (("sea", ("바다",)), ("city", ("도시", "도심")), ("forest", ("숲",)),
              ("mountain", ("산 ", "산에", "산,", "산 능선"))),
}


def parse_attributes(caption: str) -> dict[str, str | None]:
    """Best-effort reading of each attribute from a caption (None where no cue is found).

    Used to count how often generated captions get direction, speed, etc. right; exact for
    the canonical style, good for the paraphrases.
    """
    text = " " + " ".join(caption.replace(".", " ").replace(",", ", ").split()) + " "
    found: dict[str, str | None] = {}
    for attribute, cues in _CUES.items():
        hits = [(text.find(c), value) for value, words in cues for c in words if c in text]
        found[attribute] = min(hits)[1] if hits else None
    # the sky is in every scene's picture and in "하늘 높이" (upwards): it is the scene only
    # when no other scene is named
    if found["scene"] is None and "하늘" in text.replace("하늘 높이", ""):
        found["scene"] = "sky"
    return found


# --- the "detailed" style: several sentences, with the sky and where the object comes from ---
SCENE_DESC = {"sky": "넓은 하늘", "sea": "잔잔한 바다", "city": "고층 빌딩이 늘어선 도시",
              "forest": "울창한 숲", "mountain": "높은 산"}
SKY_SENTENCE = {
    ("clear", "day"): ("하늘은 맑고 푸르다.", "푸른 하늘에 해가 빛난다."),
    ("clear", "sunset"): ("하늘이 주황빛 노을로 물들어 있다.", "노을이 하늘을 주황빛으로 물들였다."),
    ("clear", "night"): ("밤하늘에 달과 별이 떠 있다.", "어두운 하늘에 달과 별이 빛난다."),
    ("rain", "day"): ("잿빛 하늘에서 비가 내린다.", "흐린 하늘에서 빗줄기가 떨어진다."),
    ("rain", "sunset"): ("저물녘 흐린 하늘에서 비가 내린다.", "해 질 무렵 잿빛 하늘에서 비가 쏟아진다."),
    ("rain", "night"): ("어두운 밤하늘에서 비가 내린다.", "캄캄한 하늘에서 빗줄기가 떨어진다."),
    ("snow", "day"): ("흐린 하늘에서 눈이 내리고 땅은 눈으로 덮여 있다.", "하얀 눈이 내려 온 세상이 눈에 덮였다."),
    ("snow", "sunset"): ("저물녘 하늘에서 눈이 내리고 땅은 눈으로 덮여 있다.", "해 질 무렵 눈이 내려 땅이 하얗게 덮였다."),
    ("snow", "night"): ("어두운 밤하늘에서 눈이 내리고 땅은 눈으로 덮여 있다.", "캄캄한 밤에 눈이 내려 땅이 하얗다."),
}
FROM_TO = {"left": ("오른쪽에서", "왼쪽으로"), "right": ("왼쪽에서", "오른쪽으로"),
           "up": ("아래에서", "위로"), "down": ("위에서", "아래로")}


def detailed_caption(a: ClipAttributes) -> str:
    """The canonical detailed description: scene and time, the sky and weather, the motion."""
    start, end = FROM_TO[a.direction]
    return (f"{TIME[a.time]}의 {SCENE_DESC[a.scene]} 풍경이다. {SKY_SENTENCE[(a.weather, a.time)][0]} "
            f"{subject(OBJECT_NP[a.object])} 화면 {start} {end} {SPEED[a.speed]} 움직인다.")


def detailed_references(a: ClipAttributes, rng: np.random.Generator, n: int = 3) -> list[str]:
    """The canonical detailed description followed by n-1 distinct paraphrases."""
    start, end = FROM_TO[a.direction]
    refs = [detailed_caption(a)]
    for _ in range(20):
        if len(refs) >= n:
            break
        motion = (f"{subject(OBJECT_NP[a.object])} {start} {end} "
                  f"{_pick(rng, SPEED_ALT[a.speed])} {_verb(rng, a)}.")
        sky = _pick(rng, SKY_SENTENCE[(a.weather, a.time)])
        place = f"{_pick(rng, TIME_ALT[a.time])} {SCENE_DESC[a.scene]}"
        sentence = (f"{motion} {place} 풍경이다. {sky}" if rng.random() < 0.5
                    else f"{place}, {sky} {motion}")
        if sentence not in refs:
            refs.append(sentence)
    return refs
