"""Benchmark METEOR on Korean captions: start-up, tokenize, score, segments/s.

    caption-bench meteor [--n 1000] [--refs 3] [--seed 0]

Builds N synthetic Korean background-video captions (two clauses, 15-30
morphemes) each with REFS references describing the same scene in other
words, then measures in one run: Kiwi start-up, tokenization of all texts
(one batch), METEOR scoring (segments + corpus), and the total after start-up.
Wall and CPU seconds are both shown: Kiwi analyses a batch on 2 threads, so
on an otherwise idle machine wall < CPU for tokenization; on a busy machine
the CPU column is the steadier number. Writes <out>/results.json, results.md and
results.png.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import time
from pathlib import Path

from caption.bench.harness import BENCH_DATA, bars, write_results
from eval.meteor import Scorer
from eval.tokenize_ko import KiwiTokenizer

SUBJECTS = [["남자가", "한 남성이", "남자 한 명이"], ["여자가", "한 여성이", "젊은 여자가"],
            ["아이들이", "어린이들이", "꼬마들이"], ["강아지가", "개 한 마리가", "작은 강아지가"],
            ["사람들이", "행인들이", "많은 사람들이"], ["자동차들이", "차들이", "차량들이"],
            ["고양이가", "고양이 한 마리가", "새끼 고양이가"], ["노인이", "할아버지가", "나이 든 남성이"]]
PLACES = [["공원에서", "공원 길을", "나무가 많은 공원에서"], ["바닷가에서", "해변에서", "모래사장 위에서"],
          ["도시 거리에서", "번화가에서", "도심 도로에서"], ["숲 속에서", "숲길에서", "나무 사이로"],
          ["시장에서", "전통시장 골목에서", "시장 안에서"], ["지하철역에서", "역 승강장에서", "지하철 안에서"],
          ["강변에서", "강가를 따라", "한강 공원에서"], ["눈 덮인 산길에서", "눈이 쌓인 길에서", "겨울 산에서"]]
ACTIONS = [["천천히 걷고 있다.", "걸어간다.", "산책한다."], ["빠르게 달린다.", "뛰어간다.", "달리고 있다."],
           ["뛰어논다.", "신나게 놀고 있다.", "즐겁게 논다."], ["지나간다.", "오가고 있다.", "이동한다."],
           ["앉아 쉬고 있다.", "벤치에 앉아 있다.", "잠시 쉰다."], ["사진을 찍는다.", "카메라로 촬영한다.", "사진을 찍고 있다."]]
SCENES = [["하늘에는 구름이 떠 있다.", "구름 낀 하늘이 보인다.", "하늘에 흰 구름이 흘러간다."],
          ["뒤로 높은 건물들이 보인다.", "배경에 빌딩이 서 있다.", "멀리 고층 건물이 있다."],
          ["해가 지며 하늘이 붉게 물든다.", "노을이 지고 있다.", "붉은 석양이 비친다."],
          ["비가 조용히 내린다.", "빗방울이 떨어진다.", "비 오는 날이다."],
          ["주변에 나무가 무성하다.", "초록 나무들이 둘러싸고 있다.", "나무가 많은 풍경이다."],
          ["밤이라 가로등이 켜져 있다.", "밤거리에 불빛이 반짝인다.", "어두운 밤 풍경이다."]]


def make_data(n: int, n_refs: int, seed: int):
    rng = random.Random(seed)
    preds, refs = [], []
    for _ in range(n):
        scene = [rng.choice(SUBJECTS), rng.choice(PLACES), rng.choice(ACTIONS), rng.choice(SCENES)]

        def caption(scene=scene):
            s, p, a, b = (rng.choice(part) for part in scene)
            first = f"{p} {s} {a}" if rng.random() < 0.5 else f"{s} {p} {a}"
            return f"{first} {b}" if rng.random() < 0.8 else first

        refs.append([caption() for _ in range(n_refs)])
        pred = caption()
        if rng.random() < 0.2:  # some captions are about something else
            pred = f"{rng.choice(rng.choice(SUBJECTS))} {rng.choice(rng.choice(ACTIONS))}"
        preds.append(pred)
    return preds, refs


def _kiwi_version() -> str:
    try:
        import kiwipiepy

        return kiwipiepy.__version__
    except Exception:  # pragma: no cover
        return "?"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--n", type=int, default=1000, help="segments (default 1000)")
    ap.add_argument("--refs", type=int, default=3, help="references per segment (default 3)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=BENCH_DATA / "meteor")


def clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def since(start: tuple[float, float]) -> tuple[float, float]:
    now = clock()
    return now[0] - start[0], now[1] - start[1]


def measure(preds: list[str], refs: list[list[str]]) -> dict:
    """Wall and CPU seconds of Kiwi's start-up, of tokenizing every text, and of scoring; the result."""
    t = clock()
    tok = KiwiTokenizer()
    tok.load()
    load = since(t)
    scorer = Scorer(tokenizer=tok)  # the code path of meteor_score / caption-meteor
    t = clock()
    hyp_toks, ref_toks = scorer.tokenize(preds, refs)
    tokd = since(t)
    t = clock()
    result = scorer.corpus(hyp_toks, ref_toks)
    scored = since(t)
    n_morph = sum(map(len, hyp_toks)) + sum(len(x) for r in ref_toks for x in r)
    return {"load": load, "tokenize": tokd, "score": scored, "result": result, "morphemes": n_morph}


def run(args) -> int:
    preds, refs = make_data(args.n, args.refs, args.seed)
    n_texts = len(preds) + sum(len(r) for r in refs)
    m = measure(preds, refs)
    tokd, scored, result = m["tokenize"], m["score"], m["result"]
    total = (tokd[0] + scored[0], tokd[1] + scored[1])
    rows = [
        ("start-up (load Kiwi)", m["load"], "", ""),
        ("tokenize", tokd, f"{n_texts} texts", f"{n_texts / tokd[0]:,.0f} texts/s"),
        ("score (METEOR)", scored, f"{args.n} segments", f"{args.n / scored[0]:,.0f} segments/s"),
        ("total after start-up", total, f"{args.n} segments", f"{args.n / total[0]:,.0f} segments/s"),
    ]
    try:
        load_avg = " load average %.1f," % os.getloadavg()[0]
    except OSError:
        load_avg = ""
    title = (f"METEOR benchmark: {args.n} Korean segments x {args.refs} references, "
             f"{m['morphemes'] / n_texts:.1f} morphemes/text; python {platform.python_version()}, "
             f"{os.cpu_count()} CPUs,{load_avg} kiwipiepy {_kiwi_version()}")
    lines = [title, f"{'stage':<22} {'wall s':>7} {'cpu s':>7}  {'items':<14} {'rate (wall)':>18}"]
    lines += [f"{name:<22} {wall:>7.3f} {cpu:>7.3f}  {items:<14} {rate:>18}" for name, (wall, cpu), items, rate in rows]
    lines.append(f"corpus METEOR {result.score:.4f}, mean segment METEOR "
                 f"{sum(result.segment_scores) / len(result.segments):.4f}")
    print("\n".join(lines))
    keys = ("stage", "wall_s", "cpu_s", "items", "rate")
    write_results(args.out, "meteor", {"n": args.n, "refs": args.refs, "seed": args.seed, "corpus_meteor": result.score,
                                       "rows": [dict(zip(keys, (n, w, c, i, r))) for n, (w, c), i, r in rows]},
                  ["```", *lines, "```"],
                  bars([r[0] for r in rows], {"wall s": [r[1][0] for r in rows], "cpu s": [r[1][1] for r in rows]},
                       "seconds"), f"METEOR on {args.n} Korean segments x {args.refs} references")
    return 0
