// Renders one page of clips from the JSON in #report-data. The view (status filter, sort, search,
// page) lives in the URL hash, e.g. #status=error&sort=score&q=비&page=2, so a view can be
// bookmarked, shared, or loaded by a headless browser. Text is set with textContent only: captions
// and file names never become markup.
"use strict";
(function () {
  const started = performance.now();
  const DATA = JSON.parse(document.getElementById("report-data").textContent);
  const CLIPS = DATA.clips;
  const $ = (id) => document.getElementById(id);
  const STATUSES = ["all", "ok", "error"], SORTS = ["video", "score", "score-desc"];
  let searchText = null; // built on the first search: lower-cased path, captions and errors per clip

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function readState() {
    const p = new URLSearchParams(location.hash.replace(/^#/, ""));
    const pick = (v, allowed, dflt) => (allowed.includes(v) ? v : dflt);
    const size = parseInt(p.get("size"), 10);
    return {
      status: pick(p.get("status"), STATUSES, "all"),
      sort: pick(p.get("sort"), SORTS, "video"),
      q: (p.get("q") || "").normalize("NFC"),
      page: Math.max(1, parseInt(p.get("page"), 10) || 1),
      size: size > 0 && size <= 1000 ? size : DATA.page_size,
    };
  }

  function writeState(state) {
    const p = new URLSearchParams();
    if (state.status !== "all") p.set("status", state.status);
    if (state.sort !== "video") p.set("sort", state.sort);
    if (state.q) p.set("q", state.q);
    if (state.page > 1) p.set("page", String(state.page));
    if (state.size !== DATA.page_size) p.set("size", String(state.size));
    const hash = p.toString();
    history.replaceState(null, "", hash ? "#" + hash : location.pathname + location.search);
    render();
  }

  function matching(state) {
    let list = CLIPS.map((c, i) => i);
    if (state.status !== "all") list = list.filter((i) => CLIPS[i].s === state.status);
    if (state.q) {
      if (!searchText) {
        searchText = CLIPS.map((c) => [c.v, ...c.r.map((r) => (r.caption || "") + "\n" + (r.error || ""))]
          .join("\n").normalize("NFC").toLowerCase());
      }
      const q = state.q.toLowerCase();
      list = list.filter((i) => searchText[i].includes(q));
    }
    if (state.sort !== "video") {
      const dir = state.sort === "score" ? 1 : -1;
      // clips without a score (errors, no references) go last either way
      list.sort((a, b) => {
        const sa = CLIPS[a].score, sb = CLIPS[b].score;
        if (sa === undefined || sb === undefined) return (sa === undefined) - (sb === undefined) || a - b;
        return dir * (sa - sb) || a - b;
      });
    }
    return list;
  }

  function renderHeader() {
    document.title = DATA.title;
    $("title").textContent = DATA.title;
    const m = DATA.meta || {};
    $("source").textContent = `${DATA.records_file} · clips from ${m.input_dir || "?"} (${m.input_dir_from || ""})` +
      (m.references ? ` · references ${m.references}` : "") + ` · ${DATA.models.join(", ")} · made ${DATA.generated}`;
    const nErr = CLIPS.filter((c) => c.s === "error").length;
    const totals = [["clips", CLIPS.length], ["records", DATA.n_records], ["clips with errors", nErr],
                    ["captions flagged", DATA.flagged], ["clips with thumbnails", m.thumbnail_clips]];
    for (const c of DATA.corpus) {
      // the score is over the captions that exist; what was not captioned or failed is counted beside it
      const made = c.settings ? `, settings ${c.settings}` : "";
      totals.push([`corpus METEOR, adapter ${c.adapter}${made} (on ${c.field}, over ${c.n} captioned of ` +
                   `${c.references}: ${c.missing} not captioned, ${c.errors} failed)`,
                   c.meteor === null ? "-" : c.meteor.toFixed(4)]);
    }
    for (const [label, value] of totals) {
      const span = el("span", { class: "total" });
      span.append(el("b", {}, value), " " + label);
      $("totals").append(span);
    }
    for (const note of DATA.notes) $("notes").append(el("li", {}, note));
    // what the job warned about (e.g. a model that does not know this footage): above everything
    for (const warning of DATA.warnings || []) $("warnings").append(el("li", {}, warning));
    $("warnings").hidden = !(DATA.warnings || []).length;
  }

  function strip(clip) {
    const box = el("div", { class: "strip" });
    if (!clip.t) {
      box.append(el("div", { class: "placeholder" },
        clip.tn === undefined ? "no thumbnails" : DATA.placeholders[clip.tn]));
      return box;
    }
    clip.t.forEach((b64, k) => {
      const fig = el("figure");
      // the data URI is attached only now, for the clips on the page being shown
      fig.append(el("img", { src: "data:image/jpeg;base64," + b64, alt: `frame ${clip.ti[k]}`,
                             title: `frame ${clip.ti[k]}` }), el("figcaption", {}, clip.ti[k]));
      box.append(fig);
    });
    return box;
  }

  function captionRow(r) {
    const tr = el("tr", { class: "record " + r.status });
    tr.append(el("td", {}, r.task || "caption"), el("td", {}, r.adapter || "base"));
    const st = el("td");
    st.append(el("span", { class: "badge " + r.status }, r.status));
    if (r.flags) st.append(" ", el("span", { class: "badge flagged", title: r.flags.join("; ") }, "flagged"));
    tr.append(st);
    if (r.status === "ok") {
      const td = el("td", { class: "caption", lang: "ko" }, r.caption);
      if (r.settings_label) td.append(el("div", { class: "settings" }, "settings: " + r.settings_label));
      if (r.changed) td.append(el("div", { class: "flag changed" }, r.changed));
      for (const flag of r.flags || []) td.append(el("div", { class: "flag" }, flag));
      if (r.best_reference) td.append(el("div", { class: "ref" }, "closest reference: " + r.best_reference));
      tr.append(td);
    } else {
      const td = el("td", { class: "err" }, r.error || "error");
      if (r.settings_label) td.append(el("div", { class: "settings" }, "settings: " + r.settings_label));
      if (r.changed) td.append(el("div", { class: "flag changed" }, r.changed));
      tr.append(td);
    }
    tr.append(el("td", { class: "num meteor" }, r.meteor === undefined ? "" : r.meteor.toFixed(3)));
    const info = [r.output_tokens !== undefined ? r.output_tokens + " tok" : "",
                  r.generate_s !== undefined ? r.generate_s + " s" : "", r.finish_reason || ""];
    tr.append(el("td", { class: "num" }, info.filter(Boolean).join(" · ")));
    return tr;
  }

  function clipRow(clip) {
    const art = el("article", { class: "clip " + clip.s, "data-video": clip.v, "data-status": clip.s });
    const h = el("h2", {}, clip.v);
    h.append(el("span", { class: "meta" }, [clip.dec ? "decoder " + clip.dec : "",
      clip.score !== undefined ? "METEOR " + clip.score.toFixed(3) : ""].filter(Boolean).join(" · ")));
    art.append(h, strip(clip));
    for (const note of clip.notes || []) art.append(el("p", { class: "notes" }, note));
    const table = el("table");
    const head = el("tr");
    for (const col of ["task", "adapter", "status", "caption / error", "METEOR", ""]) head.append(el("th", {}, col));
    table.append(head);
    for (const r of clip.r) table.append(captionRow(r));
    art.append(table);
    return art;
  }

  // A long video's timeline, above its first entry on the page: segments (green, red if failed),
  // cuts between shots (ticks) and the spans no segment covers (hatched, the reason on hover).
  function timeline(video) {
    const t = (DATA.timelines || {})[video];
    if (!t) return null;
    const box = el("section", { class: "timeline", "data-video": video });
    const share = t.d > 0 ? Math.round((100 * t.c) / t.d) : 0;
    const reasons = {};
    for (const [a, b, why] of t.gap) reasons[why] = (reasons[why] || 0) + (b - a);
    const left = Object.entries(reasons).map(([k, v]) => `${k} ${v.toFixed(1)} s`).join(", ") || "nothing";
    const moves = (reasons.dissolve || 0) + (reasons.fade || 0);
    const outside = t.d - moves > 0 ? Math.round((100 * t.c) / (t.d - moves)) : 0;
    box.append(el("h3", {}, `${video}: ${t.c.toFixed(1)} of ${t.d.toFixed(1)} s captioned (${share}%; ` +
      `${outside}% outside transitions) · ` +
      `${t.seg.length} segments · ${t.cuts.length} cuts · left out: ${left}`));
    const bar = el("div", { class: "bar" });
    const at = (s) => `${((100 * s) / t.d).toFixed(3)}%`;
    const span = (cls, a, b, title) => {
      const node = el("div", { class: cls, title });
      node.style.left = at(a);
      node.style.width = at(b - a);
      return node;
    };
    const s1 = (s) => s.toFixed(1);  // times in tenths, as the header and each segment's title show them
    t.seg.forEach(([a, b, ok], k) => bar.append(span("seg " + (ok ? "ok" : "error"), a, b,
      `segment ${k}: ${s1(a)}-${s1(b)} s${ok ? "" : " (failed)"}`)));
    for (const [a, b, why] of t.gap) bar.append(span("gap " + why, a, b, `${s1(a)}-${s1(b)} s left out: ${why}`));
    for (const c of t.cuts) bar.append(span("cut", c, c, `cut at ${s1(c)} s`));
    box.append(bar);
    return box;
  }

  function render() {
    const state = readState();
    $("status").value = state.status;
    $("sort").value = state.sort;
    if (document.activeElement !== $("q")) $("q").value = state.q;
    const list = matching(state);
    const pages = Math.max(1, Math.ceil(list.length / state.size));
    const page = Math.min(state.page, pages);
    const shown = list.slice((page - 1) * state.size, page * state.size);
    $("pageinfo").textContent = `page ${page} of ${pages} · ${list.length} of ${CLIPS.length} clips`;
    $("prev").disabled = page <= 1;
    $("next").disabled = page >= pages;
    const main = $("clips");
    const rows = [];
    let lastVideo = null;
    for (const i of shown) {
      const vid = CLIPS[i].vid;
      if (vid && vid !== lastVideo) {
        const line = timeline(vid);
        if (line) rows.push(line);
      }
      lastVideo = vid || null;
      rows.push(clipRow(CLIPS[i]));
    }
    main.replaceChildren(...rows);
    if (!shown.length) main.append(el("p", { id: "empty" }, "No clip matches."));
    main.dataset.page = page;
    main.dataset.matching = list.length;
  }

  function change(update) {
    writeState(Object.assign(readState(), update));
  }

  renderHeader();
  $("status").addEventListener("change", (e) => change({ status: e.target.value, page: 1 }));
  $("sort").addEventListener("change", (e) => change({ sort: e.target.value, page: 1 }));
  let timer = null;
  $("q").addEventListener("input", (e) => {
    clearTimeout(timer);
    timer = setTimeout(() => change({ q: e.target.value.normalize("NFC"), page: 1 }), 200);
  });
  $("prev").addEventListener("click", () => change({ page: readState().page - 1 }));
  $("next").addEventListener("click", () => change({ page: readState().page + 1 }));
  window.addEventListener("hashchange", render);
  render();
  document.body.dataset.firstRenderMs = Math.round(performance.now() - started); // parse + first page
})();
