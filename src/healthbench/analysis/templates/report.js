(() => {
  "use strict";
  const SVG = "http://www.w3.org/2000/svg";
  const summary = JSON.parse(document.getElementById("report-summary").textContent);
  const runs = summary.runs;
  const color = (i) => `var(--c${i % 8})`;
  const fmt = (x, d = 3) => (x === null || x === undefined ? "–" : x.toFixed(d));

  function el(tag, attrs = {}, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text; // user text is only ever set as text
    return node;
  }
  function svgEl(tag, attrs = {}, title) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (title !== undefined) {
      const t = document.createElementNS(SVG, "title");
      t.textContent = title;
      node.appendChild(t);
    }
    return node;
  }

  // Horizontal bars, one group per category and one bar per run, with CI whiskers.
  function barChart(container, categories, field) {
    const left = 190, right = 110, top = 24, bar = 14, gap = 12, width = 760;
    const plot = width - left - right;
    const groupH = runs.length * bar + gap;
    const height = top + categories.length * groupH + 8;
    const svg = svgEl("svg", { viewBox: `0 0 ${width} ${height}`, "aria-hidden": "true" });
    const x = (v) => left + Math.max(0, Math.min(1, v)) * plot;
    for (let t = 0; t <= 10; t += 2) {
      const g = svgEl("g", { class: "tick" });
      g.appendChild(svgEl("line", { class: "grid", x1: x(t / 10), x2: x(t / 10), y1: top - 4, y2: height - 4 }));
      const label = svgEl("text", { x: x(t / 10), y: top - 9, "text-anchor": "middle" });
      label.textContent = (t / 10).toFixed(1);
      g.appendChild(label);
      svg.appendChild(g);
    }
    categories.forEach((cat, ci) => {
      const y0 = top + ci * groupH;
      const name = svgEl("text", { x: left - 8, y: y0 + (runs.length * bar) / 2 + 4, "text-anchor": "end" });
      name.textContent = cat.length > 28 ? cat.slice(0, 27) + "…" : cat;
      svg.appendChild(name);
      runs.forEach((run, ri) => {
        const s = run[field][cat];
        const y = y0 + ri * bar;
        if (!s) {
          const none = svgEl("text", { class: "missing", x: left + 4, y: y + bar - 3, "data-run": ri, "data-key": cat });
          none.textContent = "not in this run";
          svg.appendChild(none);
          return;
        }
        const few = s.n < summary.few; // too few answers: the interval is drawn as uncertain
        const tip = `${run.label} — ${cat}: ${fmt(s.mean)} [${fmt(s.lo)}, ${fmt(s.hi)}], n = ${s.n}` +
          (few ? ` (fewer than ${summary.few}: uncertain)` : "");
        svg.appendChild(svgEl("rect", {
          class: few ? "bar uncertain" : "bar", x: left, y: y + 1, width: Math.max(0.5, x(s.mean) - left),
          height: bar - 2, fill: color(ri), stroke: color(ri), "data-run": ri, "data-key": cat, "data-mean": s.mean,
          "data-n": s.n,
        }, tip));
        if (s.lo !== null && s.hi !== null) {
          const cy = y + bar / 2;
          const err = svgEl("path", {
            class: few ? "err uncertain" : "err",
            d: `M${x(s.lo)},${cy}H${x(s.hi)}M${x(s.lo)},${cy - 4}V${cy + 4}M${x(s.hi)},${cy - 4}V${cy + 4}`,
          }, tip);
          svg.appendChild(err);
        }
        const value = svgEl("text", { class: "value", x: x(s.hi ?? s.mean) + 5, y: y + bar - 3 });
        value.textContent = `${fmt(s.mean)} n=${s.n}${few ? " †" : ""}`;
        svg.appendChild(value);
      });
    });
    container.appendChild(svg);
  }

  // Vertical bars: share of each run's graded conversations per score bin.
  function histogram(container) {
    const left = 44, bottom = 34, top = 12, width = 760, height = 260;
    const plotW = width - left - 10, plotH = height - top - bottom;
    const shares = runs.map((r) => {
      const total = r.histogram.reduce((a, b) => a + b, 0);
      return r.histogram.map((c) => (total ? c / total : 0));
    });
    const maxShare = Math.max(0.01, ...shares.flat());
    const step = [0.01, 0.02, 0.05, 0.1, 0.2, 0.25].find((s) => maxShare / s <= 5) || 0.25;
    const steps = Math.ceil(maxShare / step - 1e-9);
    const yMax = steps * step;
    const y = (v) => top + plotH - (v / yMax) * plotH;
    const svg = svgEl("svg", { viewBox: `0 0 ${width} ${height}`, "aria-hidden": "true" });
    for (let i = 0; i <= steps; i++) {
      const v = i * step;
      const g = svgEl("g", { class: "tick" });
      g.appendChild(svgEl("line", { class: "grid", x1: left, x2: width - 10, y1: y(v), y2: y(v) }));
      const t = svgEl("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end" });
      t.textContent = `${Math.round(v * 100)}%`;
      g.appendChild(t);
      svg.appendChild(g);
    }
    const slot = plotW / summary.bins.length;
    const bw = (slot - 8) / runs.length;
    summary.bins.forEach((label, bi) => {
      const x0 = left + bi * slot + 4;
      runs.forEach((run, ri) => {
        const share = shares[ri][bi];
        svg.appendChild(svgEl("rect", {
          class: "hbar", x: x0 + ri * bw, y: y(share), width: Math.max(1, bw - 1), height: top + plotH - y(share),
          fill: color(ri), "data-run": ri, "data-bin": bi, "data-count": run.histogram[bi],
        }, `${run.label} — scores ${label}: ${run.histogram[bi]} conversations (${(share * 100).toFixed(1)}%)`));
      });
      const t = svgEl("text", { class: "tick", x: x0 + (slot - 8) / 2, y: height - bottom + 16, "text-anchor": "middle" });
      t.textContent = label;
      svg.appendChild(t);
    });
    container.appendChild(svg);
  }

  // Worst-at-k: one line per model over k = 1..n, with a CI band (the same numbers as the table).
  function worstCurve(container) {
    const curves = summary.worst_at_k;
    const left = 44, bottom = 34, top = 12, right = 16, width = 760, height = 260;
    const plotW = width - left - right, plotH = height - top - bottom;
    const kMax = Math.max(1, ...curves.map((c) => c.points.length));
    const x = (k) => left + (kMax === 1 ? plotW / 2 : ((k - 1) / (kMax - 1)) * plotW);
    const y = (v) => top + plotH - Math.max(0, Math.min(1, v)) * plotH;
    const svg = svgEl("svg", { viewBox: `0 0 ${width} ${height}`, "aria-hidden": "true" });
    for (let t = 0; t <= 10; t += 2) {
      const g = svgEl("g", { class: "tick" });
      g.appendChild(svgEl("line", { class: "grid", x1: left, x2: width - right, y1: y(t / 10), y2: y(t / 10) }));
      const label = svgEl("text", { x: left - 6, y: y(t / 10) + 4, "text-anchor": "end" });
      label.textContent = (t / 10).toFixed(1);
      g.appendChild(label);
      svg.appendChild(g);
    }
    for (let k = 1; k <= kMax; k++) {
      const label = svgEl("text", { class: "tick", x: x(k), y: height - bottom + 16, "text-anchor": "middle" });
      label.textContent = `k=${k}`;
      svg.appendChild(label);
    }
    curves.forEach((curve, ci) => {
      const pts = curve.points.filter((p) => p.value !== null);
      if (!pts.length) return;
      const band = pts.filter((p) => p.lo !== null && p.hi !== null);
      if (band.length > 1) {
        const upper = band.map((p) => `${x(p.k)},${y(p.hi)}`);
        const lower = band.slice().reverse().map((p) => `${x(p.k)},${y(p.lo)}`);
        svg.appendChild(svgEl("polygon", { class: "band", points: [...upper, ...lower].join(" "), fill: color(ci), "fill-opacity": 0.15 }));
      }
      svg.appendChild(svgEl("polyline", {
        class: "curve", points: pts.map((p) => `${x(p.k)},${y(p.value)}`).join(" "),
        fill: "none", stroke: color(ci), "stroke-width": 2, "data-model": curve.model,
      }));
      pts.forEach((p) => svg.appendChild(svgEl("circle", { cx: x(p.k), cy: y(p.value), r: 3, fill: color(ci) },
        `${curve.model} — worst-at-${p.k}: ${fmt(p.value)} [${fmt(p.lo)}, ${fmt(p.hi)}] over ${p.n} conversations`)));
    });
    container.appendChild(svg);
  }

  for (const [id, field, keys] of [["chart-themes", "themes", summary.themes], ["chart-axes", "axes", summary.axes]]) {
    const node = document.getElementById(id);
    if (node && keys.length) barChart(node, keys, field);
  }
  const distribution = document.getElementById("chart-distribution");
  if (distribution) histogram(distribution); // (a report of meta-eval runs alone has none)
  const worstNode = document.getElementById("chart-worst");
  if (worstNode && summary.worst_at_k.length) worstCurve(worstNode);

  if (!document.getElementById("report-conversations")) {
    document.body.dataset.ready = "true"; // made without the conversations: charts and tables only
    return;
  }

  // ---- conversation browser ------------------------------------------------------------------------
  const ROW = 64;
  const status = document.getElementById("browser-status");
  const list = document.getElementById("conv-list");
  const spacer = document.getElementById("conv-spacer");
  const rowsBox = document.getElementById("conv-rows");
  const detail = document.getElementById("conv-detail");
  const controls = {
    theme: document.getElementById("f-theme"), run: document.getElementById("f-run"),
    min: document.getElementById("f-min"), max: document.getElementById("f-max"),
    text: document.getElementById("f-text"), sort: document.getElementById("f-sort"),
    ungraded: document.getElementById("f-ungraded"),
  };
  let data = null, byRun = [], meanScore = [], hasUngraded = [], visible = [], current = null;
  const filterForm = document.getElementById("filters");
  if (filterForm) filterForm.addEventListener("submit", (event) => event.preventDefault());

  async function decode() {
    const node = document.getElementById("report-conversations");
    const binary = atob(node.textContent.trim());
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }

  function index() {
    const n = data.conversations.length;
    byRun = data.answers.map((answers) => {
      const per = Array.from({ length: n }, () => []);
      answers.forEach((a) => per[a.c].push(a));
      return per;
    });
    meanScore = byRun.map((per) => per.map((list) => {
      const graded = list.filter((a) => a.score !== null);
      return graded.length ? graded.reduce((s, a) => s + a.score, 0) / graded.length : null;
    }));
    hasUngraded = data.conversations.map((_, ci) => byRun.some((per) => per[ci].some((a) => a.score === null)));
    for (const conv of data.conversations) {
      conv.search = (conv.id + " " + conv.prompt.map((m) => m[1]).join(" ")).toLowerCase();
      const users = conv.prompt.filter((m) => m[0] === "user");
      conv.excerpt = (users.length ? users[users.length - 1][1] : conv.prompt[conv.prompt.length - 1][1]).slice(0, 200);
    }
  }

  // The chosen run's score minus the baseline's (the first run, or the second when the first is
  // chosen), per conversation; null unless both graded it.
  function change(ri) {
    const base = meanScore[ri === 0 ? 1 : 0] || [];
    return meanScore[ri].map((s, ci) => (s === null || base[ci] == null ? null : s - base[ci]));
  }

  function number(input) {
    const v = parseFloat(input.value);
    return Number.isFinite(v) ? v : null;
  }

  function applyFilters() {
    const theme = controls.theme.value, ri = Number(controls.run.value || 0);
    const lo = number(controls.min), hi = number(controls.max);
    const words = controls.text.value.trim().toLowerCase();
    const onlyUngraded = controls.ungraded.checked;
    const scores = meanScore[ri];
    visible = [];
    data.conversations.forEach((conv, ci) => {
      if (theme && !conv.themes.includes(theme)) return;
      if (onlyUngraded && !hasUngraded[ci]) return;
      if (lo !== null || hi !== null) {
        const s = scores[ci];
        if (s === null || (lo !== null && s < lo) || (hi !== null && s > hi)) return;
      }
      if (words && !conv.search.includes(words)) return;
      visible.push(ci);
    });
    const order = controls.sort.value;
    if (order !== "file") {
      const sign = order === "asc" || order === "loss" ? 1 : -1;
      const key = order === "gain" || order === "loss" ? change(ri) : scores;
      visible.sort((a, b) => {
        const sa = key[a], sb = key[b];
        if (sa === null) return sb === null ? a - b : 1;
        if (sb === null) return -1;
        return sign * (sa - sb) || a - b;
      });
    }
    status.textContent = `Showing ${visible.length.toLocaleString("en")} of ${data.conversations.length.toLocaleString("en")} conversations`;
    spacer.style.height = `${visible.length * ROW}px`;
    list.scrollTop = 0;
    draw();
  }

  function draw() {
    const first = Math.max(0, Math.floor(list.scrollTop / ROW) - 4);
    const last = Math.min(visible.length, Math.ceil((list.scrollTop + list.clientHeight) / ROW) + 4);
    rowsBox.style.transform = `translateY(${first * ROW}px)`;
    rowsBox.replaceChildren();
    for (let k = first; k < last; k++) rowsBox.appendChild(row(visible[k]));
  }

  function row(ci) {
    const conv = data.conversations[ci];
    const button = el("button", { type: "button", class: "conv-row", "data-conv": ci, "data-id": conv.id });
    if (current === ci) button.setAttribute("aria-current", "true");
    button.appendChild(el("span", { class: "excerpt" }, conv.excerpt));
    button.appendChild(el("span", { class: "tags" }, [conv.id, ...conv.themes].join(" · ")));
    const chips = el("span", { class: "scores" });
    runs.forEach((run, ri) => {
      const s = meanScore[ri][ci];
      const answered = byRun[ri][ci].length > 0;
      const chip = el("span", { class: "chip", style: `--series: ${color(ri)}`, title: run.label },
        answered ? (s === null ? "ungr." : fmt(s, 2)) : "·");
      chips.appendChild(chip);
    });
    button.appendChild(chips);
    button.addEventListener("click", () => openConversation(ci));
    return button;
  }

  const VERDICTS = { m: ["met", "✓ met"], n: ["not_met", "✗ not met"], u: ["ungraded", "? ungraded"] };

  function openConversation(ci, runIndex) {
    current = ci;
    history.replaceState(null, "", `#conversation=${encodeURIComponent(data.conversations[ci].id)}`);
    draw();
    const conv = data.conversations[ci];
    const answered = runs.map((_, ri) => byRun[ri][ci]).flatMap((list, ri) => list.map((a) => [ri, a]));
    detail.replaceChildren();
    const close = el("button", { type: "button", class: "close", "aria-label": "Close the conversation" }, "Close");
    close.addEventListener("click", () => {
      current = null;
      history.replaceState(null, "", location.pathname + location.search);
      draw();
      detail.replaceChildren(el("p", { class: "hint" }, "Open a conversation to see it here."));
    });
    detail.appendChild(close);
    detail.appendChild(el("h3", {}, `Conversation ${conv.id}`));
    if (conv.themes.length) detail.appendChild(el("p", { class: "meta" }, `Theme: ${conv.themes.join(", ")}`));
    for (const [role, content] of conv.prompt) {
      const msg = el("div", { class: "msg" });
      msg.appendChild(el("div", { class: "role" }, role));
      msg.appendChild(el("div", { class: "text" }, content));
      detail.appendChild(msg);
    }
    if (!answered.length) return;
    const tabs = el("div", { class: "tabs", role: "tablist", "aria-label": "Answers" });
    const panel = el("div", { class: "answer-panel", role: "tabpanel" });
    const show = (k) => {
      tabs.querySelectorAll("button").forEach((b, j) => b.setAttribute("aria-selected", String(j === k)));
      renderAnswer(panel, conv, answered[k][0], answered[k][1]);
    };
    answered.forEach(([ri, a], k) => {
      const label = `${runs[ri].label}${a.r ? ` · repeat ${a.r + 1}` : ""} — ${a.score === null ? "ungraded" : fmt(a.score, 2)}`;
      const b = el("button", { type: "button", role: "tab", style: `--series: ${color(ri)}` }, label);
      b.addEventListener("click", () => show(k));
      tabs.appendChild(b);
    });
    detail.appendChild(tabs);
    detail.appendChild(panel);
    const start = runIndex === undefined ? 0 : Math.max(0, answered.findIndex(([ri]) => ri === runIndex));
    show(start);
    detail.scrollTop = 0;
    detail.focus({ preventScroll: true });
  }

  function renderAnswer(panel, conv, ri, a) {
    panel.replaceChildren();
    const box = el("div", { class: "answer", style: `--series: ${color(ri)}` });
    box.appendChild(el("div", { class: "meta" },
      `${runs[ri].label} — score ${a.score === null ? "ungraded (left out)" : fmt(a.score)}`));
    box.appendChild(el("div", { class: "text" }, a.text || "(no answer: the model call failed)"));
    panel.appendChild(box);
    const table = el("table", { class: "criteria" });
    const head = el("tr");
    for (const h of ["points", "verdict", "criterion", "judge's explanation"]) head.appendChild(el("th", { scope: "col" }, h));
    table.appendChild(el("thead")).appendChild(head);
    const body = el("tbody");
    conv.rubric.forEach(([points, criterion, axis], i) => {
      const [cls, text] = VERDICTS[a.v[i]] || VERDICTS.u;
      const tr = el("tr", { class: "criterion", "data-verdict": cls });
      tr.appendChild(el("td", { class: points < 0 ? "points neg" : "points" }, String(points)));
      const penalty = points < 0 && cls === "met";
      tr.appendChild(el("td", { class: `verdict ${cls}${penalty ? " penalty" : ""}`,
        title: penalty ? "a negative criterion was met: it lowers the score" : "" }, text));
      const crit = el("td", {}, criterion);
      if (axis) crit.appendChild(el("div", { class: "meta" }, `axis: ${axis}`));
      tr.appendChild(crit);
      tr.appendChild(el("td", { class: "explanation" }, a.e[i] ?? "—"));
      body.appendChild(tr);
    });
    table.appendChild(body);
    panel.appendChild(table);
  }

  // report.html#conversation=ID opens that conversation (the flipped list links this way).
  function openLinked() {
    const linked = decodeURIComponent((location.hash.match(/^#conversation=(.+)$/) || [])[1] || "");
    const target = data.conversations.findIndex((c) => c.id === linked);
    if (target < 0) return;
    openConversation(target);
    document.getElementById("browser").scrollIntoView();
  }

  let pending = false;
  list.addEventListener("scroll", () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; draw(); });
  });
  for (const c of Object.values(controls)) c.addEventListener("input", () => data && applyFilters());

  decode().then((decoded) => {
    data = decoded;
    index();
    applyFilters();
    openLinked();
    window.addEventListener("hashchange", openLinked);
    document.body.dataset.ready = "true";
  }).catch((err) => {
    status.textContent = `The conversations could not be loaded in this browser (${err.message}); the scores above are complete.`;
    document.body.dataset.ready = "error";
  });
})();
