"""Benchmark results kept as dated JSON files (docs/results/<benchmark>/<YYYY-MM-DD>-<commit>.json),
rendered into one snippet per benchmark (docs/snippets/bench/<benchmark>.md) and into the README's
headline table.

A results file is what `caption-bench` writes (caption/bench/harness.py write_results: `benchmark`, `title`,
`machine` as machine_stamp() makes it, and the benchmark's own figures) plus what the docs need:
`command` (the command line that made it), `tables` (each {title, columns, rows}) and `provenance`
(how the file came here). `python -m scripts.docsgen record <dir>` files a fresh run (see record.py);
files transcribed from an older README say so in their provenance.

Per benchmark, results are grouped by command; the groups come newest first, each showing its newest
result in full and listing the older files of the same command by date, so a rerun replaces a table
instead of piling up beside it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from scripts.docsgen.markdown import page, table


@dataclass
class Result:
    path: Path
    data: dict

    @property
    def benchmark(self) -> str:
        return self.data["benchmark"]

    @property
    def date(self) -> str:
        return self.data["machine"]["date_utc"]

    @property
    def command(self) -> str:
        return self.data["command"]


def load_results(results_dir: Path) -> dict[str, list[Result]]:
    """benchmark -> its results, newest first. A file whose folder is not its benchmark's fails."""
    found: dict[str, list[Result]] = {}
    for path in sorted(Path(results_dir).glob("*/*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for key in ("benchmark", "command", "machine", "tables", "provenance"):
            if key not in data:
                raise ValueError(f"{path}: no `{key}` (python -m scripts.docsgen record files a run with all of them)")
        if data["benchmark"] != path.parent.name:
            raise ValueError(f"{path}: benchmark {data['benchmark']!r} filed under {path.parent.name}/")
        found.setdefault(data["benchmark"], []).append(Result(path, data))
    for results in found.values():
        results.sort(key=lambda r: (r.date, r.path.name), reverse=True)
    return found


def machine_line(machine: dict) -> str:
    """The machine stamp in one line; unknown fields (older results) are left out, not guessed."""
    parts = []
    if machine.get("cpu_model"):
        parts.append(machine["cpu_model"])
    if machine.get("cores"):
        usable = machine.get("cores_usable")
        parts.append(f"{usable}/{machine['cores']} cores" if usable else f"{machine['cores']} cores")
    if machine.get("gpus"):
        parts.append(", ".join(machine["gpus"]))
    if machine.get("memory_bandwidth_gbs"):
        parts.append(f"memory {machine['memory_bandwidth_gbs']:g} GB/s (copy)")
    load = machine.get("load_average")
    if load:
        parts.append("load " + ("/".join(f"{x:g}" for x in load) if isinstance(load, list) else str(load)))
    if machine.get("git_commit"):
        commit = machine["git_commit"]
        parts.append(f"commit {commit[:12]}" + ("-dirty" if commit.endswith("-dirty") else ""))
    parts.append(machine["date_utc"])
    return ", ".join(parts)


def render_result(result: Result) -> str:
    """One result: its command, what and where it measured, where the file is, its tables. The link is
    relative to a page at the top of docs/, where every page that includes a benchmark snippet lives."""
    data = result.data
    name = f"results/{result.benchmark}/{result.path.name}"
    lines = [f"```bash\n{result.command}\n```", "",
             (f"{data['title']}. " if data.get("title") else "") + f"Machine: {machine_line(data['machine'])}. "
             f"File: [`{name}`]({name}), {data['provenance']}.", ""]
    for t in data["tables"]:
        if t.get("title"):
            lines += [t["title"], ""]
        lines += [table(t["columns"], t["rows"]), ""]
    if data.get("notes"):
        lines += [data["notes"], ""]
    return "\n".join(lines)


def benchmark_snippet(benchmark: str, results: list[Result]) -> str:
    groups: dict[str, list[Result]] = {}
    for r in results:  # newest first, so each group's first result is its newest
        groups.setdefault(r.command, []).append(r)
    parts = []
    for members in groups.values():
        parts.append(render_result(members[0]))
        if len(members) > 1:
            older = ", ".join(f"[{m.date[:10]}](results/{benchmark}/{m.path.name})" for m in members[1:])
            parts.append(f"Older results of this command: {older}.")
    return page(f"docs/results/{benchmark}/*.json", *parts)


# --- the README's headline table -------------------------------------------------------------------

@dataclass(frozen=True)
class Headline:
    """One figure of the README: the cell `column` of the first row whose cells match `row`, in the
    newest result of `command` (so a rerun of that command, filed, moves the README's figure too)."""
    what: str
    benchmark: str
    command: str
    row: tuple[tuple[str, str], ...]
    column: str
    page: str


HEADLINES = (
    Headline("vLLM over the best transformers batch, whole job (bench model, bf16 CPU, 384 clips)", "engines",
             "caption-bench engines --model bench --dtype bfloat16 --n 384 --hf-batch 16 --max-num-seqs 32 64",
             (("engine", "vllm"), ("setting", "max_num_seqs=64")), "vs best transformers", "docs/benchmarks.md"),
    Headline("the whole job against vLLM handed every decoded clip at once", "engines",
             "caption-bench engines --model bench --hf-batch 32 --max-num-seqs 16 32 64",
             (("engine", "vllm"), ("setting", "max_num_seqs=64 (the tier's)")), "job / alone", "docs/benchmarks.md"),
    Headline("3 prompts per video, prefix caching on against off (bench model)", "prefix",
             "caption-bench prefix --model bench --n 12 --repeats 1 --threads 1",
             (("prompts/video", "3"), ("prefix caching", "on")), "speed-up", "docs/serving.md"),
    Headline("seconds to decode 8 frames of a 1080p H.264 20-s clip, 2-s GOP, one core", "decode",
             "taskset -c 1 caption-bench decode --out data/bench_decode --repeat 3",
             (("clip (`video_io.synth.footage`, camera profile, seed 1)", "1080p H.264 20 s, 2-s GOP"),), "`auto` (default)", "docs/decoding.md"),
    Headline("crashes of the job over 500 damaged files", "chaos", "caption-bench chaos --n 500 --seed 500 --out /tmp/chaos500",
             (("files", "500"),), "crashes", "docs/robustness.md"),
    Headline("peak memory at 2,000 distinct clips against 100", "memory",
             "caption-bench memory --threads 1 --tokens 4 --distinct", (("clips", "2000"),), "vs 100 clips",
             "docs/benchmarks.md"),
    Headline("the embedded model's METEOR on 200 held-out synthetic clips", "eval-toy",
             "python -m scripts.training.eval_toy --seek exact", (("frames given to the model", "as decoded"),), "METEOR",
             "docs/model-families.md"),
    Headline("METEOR scoring after start-up, 3 references per caption", "meteor", "caption-bench meteor",
             (("stage", "total after start-up"),), "rate", "docs/meteor.md"),
)


def _cell(result: Result, spec: Headline):
    for t in result.data["tables"]:
        index = {c: i for i, c in enumerate(t["columns"])}
        if spec.column not in index or any(c not in index for c, _ in spec.row):
            continue
        for row in t["rows"]:
            if all(str(row[index[c]]) == v for c, v in spec.row):
                return row[index[spec.column]]
    return None


def headline_table(results: dict[str, list[Result]]) -> str:
    rows = []
    for spec in HEADLINES:
        newest = [r for r in results.get(spec.benchmark, []) if r.command == spec.command][:1]
        for result in newest:
            value = _cell(result, spec)
            if value is not None:
                rows.append([spec.what, f"**{value}**", f"{result.data['machine']['date_utc'][:10]}, "
                             f"{_short_machine(result.data['machine'])}", f"[{spec.benchmark}]({spec.page})"])
                break
        else:
            raise ValueError(f"README headline {spec.what!r}: the newest result of `{spec.command}` in "
                             f"docs/results/{spec.benchmark}/ has no row {dict(spec.row)} with a {spec.column!r} column")
    return table(["what", "measured", "when, where", "details"], rows).replace("\\*\\*", "**")


def _short_machine(machine: dict) -> str:
    cpu = machine.get("cpu_model") or "the build machine"
    cores = f", {machine['cores']} cores" if machine.get("cores") else ""
    return re.sub(r"\s+", " ", f"{cpu}{cores}")
