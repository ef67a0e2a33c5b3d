"""One self-contained HTML file: page.html with page.css, page.js and the data inlined.

The data travels as JSON in a <script type="application/json"> element; page.js renders one page
of clips at a time from it, so a 10,000-clip report has only a page of rows (and of <img>
elements) in the DOM. Thumbnails are JPEG data URIs. A Content-Security-Policy forbids every
request, so the page works from disk with no network and cannot leak one.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from html import escape
from importlib import resources

from caption.report.data import ClipEntry, ReportData, shown_record
from caption.report.timeline import timelines

DEFAULT_PAGE_SIZE = 50


def clip_payload(clip: ClipEntry, thumbs: dict | None, placeholders: dict[str, int]) -> dict:
    records = [shown_record(r) for r in clip.records]
    scores = [r["meteor"] for r in records if "meteor" in r]
    out = {"v": clip.title, "s": clip.status, "r": records}
    if clip.segment is not None:  # which video's timeline the entry belongs under
        out["vid"] = clip.video
    if scores:
        out["score"] = min(scores)  # sort key: the clip's worst caption
    if clip.decoder:
        out["dec"] = clip.decoder
    if clip.notes:
        out["notes"] = clip.notes
    if thumbs and "t" in thumbs:
        out.update(thumbs)  # "t": [base64 JPEG, ...], "ti": frame index of each
    elif thumbs:  # why there are none; the same text for thousands of clips is stored once
        out["tn"] = placeholders.setdefault(thumbs["tn"], len(placeholders))
    return out


def render_page(data: ReportData, thumbs: dict[str, dict], meta: dict, page_size: int = DEFAULT_PAGE_SIZE) -> str:
    placeholders: dict[str, int] = {}
    clips = [clip_payload(c, thumbs.get(c.key), placeholders) for c in data.clips]
    payload = {
        "title": meta.get("title") or f"Caption review: {data.records_path.name}",
        "records_file": str(data.records_path),
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "n_records": data.n_records,
        "page_size": page_size,
        "corpus": [{**c, "adapter": c["adapter"] or "base"} for c in data.corpus],
        "notes": data.notes,
        "warnings": data.warnings,
        "meta": {k: v for k, v in meta.items() if k != "title"},
        "models": sorted({f"{r.get('model')} on {r.get('engine')}" for c in data.clips for r in c.records}),
        "flagged": sum(bool(r.get("flags")) for c in data.clips for r in c.records),
        "placeholders": list(placeholders),
        "clips": clips,
        "timelines": timelines(data.clips),  # long videos: segments, cuts and what is left out
    }
    # "<" only occurs inside JSON strings, where \u003c means the same: no "</script>" or "<!--"
    # can end or confuse the script element whatever a caption or file name contains.
    blob = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    files = resources.files("caption.report")
    template = files.joinpath("page.html").read_text(encoding="utf-8")
    parts = {
        "__TITLE__": escape(payload["title"]),
        "/*__CSS__*/": files.joinpath("page.css").read_text(encoding="utf-8"),
        "/*__JS__*/": files.joinpath("page.js").read_text(encoding="utf-8"),
        "__DATA__": blob,
    }
    missing = [m for m in parts if m not in template]
    if missing:
        raise RuntimeError(f"page.html lacks the markers {missing}")
    # one pass, so text put in (a title, a caption) is never searched for markers itself
    return re.sub("|".join(re.escape(m) for m in parts), lambda m: parts[m.group(0)], template)
