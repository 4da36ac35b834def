// healthbench console: static pages over the job service's HTTP API (docs/service.md, "Web console").
// The token lives in sessionStorage only and is sent as the bearer header of fetch() calls.
"use strict";
(() => {
  const API = "/apis/evaluation/v2/workspaces";
  const TERMINAL = new Set(["completed", "error", "cancelled"]);
  const REPORT_KINDS = new Set(["eval", "regrade", "import"]);
  const POLL_MS = 1000;
  const LABELS = ["progress", "samples", "criteria", "ungraded", "tokens (in / out)", "cost"];
  const $ = (id) => document.getElementById(id);
  const store = window.sessionStorage;
  let timer = null;
  let frameUrl = null;

  class ApiError extends Error {
    constructor(status, message) { super(message); this.status = status; }
  }

  const session = () => ({ token: store.getItem("hb.token"), workspace: store.getItem("hb.workspace") });
  const jobsPath = (name, rest = "") =>
    `${API}/${encodeURIComponent(session().workspace)}/benchmark-jobs${name ? "/" + encodeURIComponent(name) : ""}${rest}`;

  async function api(path, { method = "GET", body } = {}, token = session().token) {
    const headers = { Authorization: `Bearer ${token}`, Accept: "application/json, text/html" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(path, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer",
    });
    if (!response.ok) {
      let message = `${response.status} ${response.statusText}`;
      try {
        const e = (await response.json()).error;
        message = `${e.status} ${e.type}: ${e.message}`;
      } catch (_) { /* not the service's error shape */ }
      if (response.status === 401 && token === session().token) signOut(`Signed out: the token was refused (${message}).`);
      throw new ApiError(response.status, message);
    }
    return response;
  }

  // --- small helpers ---------------------------------------------------------------------------
  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else if (v !== undefined && v !== null && v !== false) node.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children) node.append(c);
    return node;
  }
  const count = (n) => Number(n || 0).toLocaleString("en-US");
  // an unknown cost (a model with no price) stays unknown: null is never shown as $0
  const cost = (x) => (x === null || x === undefined ? "unknown" : `$${Number(x).toFixed(4)}`);
  const share = (x) => (x === null || x === undefined ? "–" : `${(100 * Number(x)).toFixed(0)}%`);
  let flashKeep = false;  // keep a message across the next navigation (it reports what led there)
  const flash = (text, keep = false) => { $("flash").textContent = text; flashKeep = keep; };
  let moved = false;  // a new route: move the keyboard focus to the view's heading once
  function show(view) {
    for (const v of document.querySelectorAll(".view")) v.hidden = v.id !== `view-${view}`;
    if (moved && view !== "signin" && view !== "new") {
      moved = false;
      const heading = document.querySelector(`#view-${view} h2`);
      heading.setAttribute("tabindex", "-1");
      heading.focus({ preventScroll: true });
    }
  }
  function stopPolling() { if (timer) { clearTimeout(timer); timer = null; } }
  function poll(fn) { stopPolling(); timer = setTimeout(fn, POLL_MS); }
  function releaseFrame() {
    if (frameUrl) { URL.revokeObjectURL(frameUrl); frameUrl = null; }
    $("page-frame").removeAttribute("src");
  }
  async function saveAs(response, filename) {
    const url = URL.createObjectURL(await response.blob());
    const a = el("a", { href: url, download: filename });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  }

  // --- sign in / out ---------------------------------------------------------------------------
  function signOut(message = "") {
    stopPolling();
    releaseFrame();
    store.removeItem("hb.token");
    store.removeItem("hb.workspace");
    $("signin-error").textContent = message;
    if (location.hash !== "#/signin") location.hash = "#/signin"; else route();
  }

  $("signin-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const workspace = $("signin-workspace").value.trim();
    const token = $("signin-token").value.trim();
    const error = $("signin-error");
    if (!workspace || !token) { error.textContent = "Give a workspace and a token."; return; }
    error.textContent = "Checking the token…";
    try {
      await api(`${API}/${encodeURIComponent(workspace)}/benchmark-jobs?page_size=1`, {}, token);
    } catch (e) {
      error.textContent = e.status === 401
        ? `That token was not accepted (${e.message}). Check that it was pasted whole.`
        : e.status === 403 ? `That token has no access to workspace “${workspace}” (${e.message}).`
        : `Could not sign in: ${e.message}`;
      $("signin-token").focus();
      return;
    }
    store.setItem("hb.token", token);
    store.setItem("hb.workspace", workspace);
    $("signin-token").value = "";
    error.textContent = "";
    location.hash = "#/jobs";
  });
  $("sign-out").addEventListener("click", () => signOut("Signed out."));

  // --- jobs ------------------------------------------------------------------------------------
  // the cost, the judge's part and how much of its input the provider's prompt cache served
  function costCell(d) {
    if (!d.judge_cached_share && d.judge_cached_share !== 0) return cost(d.cost);
    return `${cost(d.cost)} (judge ${cost(d.judge_cost)}, ${share(d.judge_cached_share)} of its input cached)`;
  }

  function progressCells(d) {
    return [
      `${Number(d.progress || 0).toFixed(0)}%`,
      `${count(d.samples_done)} / ${count(d.samples_total)}${d.samples_failed ? ` (${count(d.samples_failed)} failed)` : ""}`,
      `${count(d.criteria_done)} / ${count(d.criteria_total)}`,
      count(d.ungraded),
      `${count(d.input_tokens)} / ${count(d.output_tokens)}`,
      costCell(d),
    ];
  }

  async function cancelJob(name) {
    try { await api(jobsPath(name, "/cancel"), { method: "POST" }); flash(`Cancel requested for ${name}.`); }
    catch (e) { flash(`Could not cancel ${name}: ${e.message}`); }
  }
  async function deleteJob(name) {
    if (!window.confirm(`Delete job ${name} and its results?`)) return false;
    try { await api(jobsPath(name), { method: "DELETE" }); flash(`Deleted ${name}.`, true); return true; }
    catch (e) { flash(`Could not delete ${name}: ${e.message}`); return false; }
  }

  const PAGE_SIZE = 50;
  // the provider batch API's part of a job (docs/batch.md): never "in progress" once the job ended
  function batchState(job) {
    const mode = job.spec.batch || "none";
    if (mode === "none") return "online";
    const running = job.status_details.batches;
    if (job.status === "completed") return `${mode}: done`;
    if (job.status === "cancelled") return `${mode}: cancelled`;
    if (job.status === "cancelling") return `${mode}: cancelling`;
    if (job.status === "error") return running ? `${mode}: stopped (${running})` : `${mode}: stopped`;
    return running || `${mode}: none running`;
  }

  function jobsQuery(search) {
    const q = new URLSearchParams(search);
    return { page: Math.max(1, parseInt(q.get("page") || "1", 10) || 1), text: (q.get("q") || "").trim() };
  }
  function jobsHash(page, text) {
    const q = new URLSearchParams();
    if (page > 1) q.set("page", String(page));
    if (text) q.set("q", text);
    const rest = q.toString();
    return `#/jobs${rest ? "?" + rest : ""}`;
  }

  async function showJobs(search = "") {
    show("jobs");
    const { page, text } = jobsQuery(search);
    const params = new URLSearchParams({ page: String(page), page_size: String(PAGE_SIZE), newest_first: "true" });
    if (text) params.set("name_contains", text);
    let list;
    try { list = await (await api(`${jobsPath()}?${params}`)).json(); }
    catch (e) { if (e.status !== 401) flash(`Could not list the jobs: ${e.message}`); return; }
    if (document.activeElement !== $("jobs-search")) $("jobs-search").value = text;
    const total = list.pagination.total;
    const pages = Math.max(1, Math.ceil(total / PAGE_SIZE));
    const first = total === 0 ? 0 : list.pagination.offset + 1;
    const last = list.pagination.offset + list.data.length;
    const which = text ? ` whose name holds “${text}”` : "";
    const range = total === 0 ? `No jobs${which}` : `Jobs ${count(first)}–${count(last)} of ${count(total)}${which}`;
    $("jobs-count").textContent = `${range}, newest first.`;
    $("jobs-caption").textContent = `${range}, newest first`;
    $("jobs-prev").disabled = page <= 1;
    $("jobs-next").disabled = page >= pages;
    $("jobs-prev").dataset.page = String(page - 1);
    $("jobs-next").dataset.page = String(page + 1);
    $("jobs-page").textContent = `page ${count(page)} of ${count(pages)}`;
    const body = $("jobs-table").querySelector("tbody");
    body.replaceChildren();
    $("jobs-empty").hidden = total > 0 || Boolean(text);
    for (const job of list.data) {
      const d = job.status_details;
      const actions = el("td", { class: "actions-cell" });
      if (!TERMINAL.has(job.status)) {
        actions.append(el("button", { type: "button", "data-action": "cancel", "aria-label": `Cancel ${job.name}`, text: "Cancel",
          onclick: async () => { await cancelJob(job.name); refresh(); } }));
      } else {
        actions.append(el("button", { type: "button", "data-action": "delete", class: "danger", "aria-label": `Delete ${job.name}`, text: "Delete",
          onclick: async () => { if (await deleteJob(job.name)) refresh(); } }));
      }
      const row = el("tr", { "data-job": job.name, "data-status": job.status },
        el("th", { scope: "row" }, el("a", { href: `#/job/${encodeURIComponent(job.name)}`, text: job.name })),
        el("td", { "data-label": "kind", text: job.spec.kind || "eval" }),
        el("td", { "data-label": "status" }, el("span", { class: `status status-${job.status}`, text: job.status })),
        el("td", { "data-label": "batch", text: batchState(job) }),
        ...progressCells(d).map((t, i) => el("td", { "data-label": LABELS[i], text: t })),
        actions);
      body.append(row);
    }
    if (list.data.some((j) => !TERMINAL.has(j.status))) poll(refresh);
  }
  $("jobs-search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = jobsHash(1, $("jobs-search").value.trim());
  });
  for (const id of ["jobs-prev", "jobs-next"]) {
    $(id).addEventListener("click", () => {
      location.hash = jobsHash(Number($(id).dataset.page), jobsQuery(location.hash.split("?")[1] || "").text);
    });
  }

  // --- new job ---------------------------------------------------------------------------------
  function syncKind() {
    const kind = $("f-kind").value;
    for (const node of document.querySelectorAll("#new-form [data-kinds]")) {
      node.hidden = !node.dataset.kinds.split(" ").includes(kind);
    }
    $("f-upload-box").hidden = kind !== "eval" || $("f-dataset").value !== "upload";
  }
  $("f-kind").addEventListener("change", syncKind);
  $("f-dataset").addEventListener("change", syncKind);

  const numberOf = (id) => ($(id).value.trim() === "" ? undefined : Number($(id).value));
  const textOf = (id) => ($(id).value.trim() === "" ? undefined : $(id).value.trim());
  function role(prefix) {
    const settings = {};
    const temperature = numberOf(`f-${prefix}-temperature`);
    const maxTokens = numberOf(`f-${prefix}-max-tokens`);
    if (temperature !== undefined) settings.temperature = temperature;
    if (maxTokens !== undefined) settings.max_tokens = maxTokens;
    const ref = { spec: $(`f-${prefix}-spec`).value.trim() };
    const url = textOf(`f-${prefix}-url`);
    if (url) ref.base_url = url;
    if (Object.keys(settings).length) ref.settings = settings;
    return ref.spec || url ? ref : undefined;
  }

  async function jobBody() {
    const kind = $("f-kind").value;
    const body = { kind, name: textOf("f-name"), description: textOf("f-description"),
      concurrency: numberOf("f-concurrency"), max_retries: numberOf("f-retries"), judge: role("judge") };
    if (kind === "eval") {
      body.model = role("model");
      if ($("f-dataset").value === "upload") {
        const file = $("f-upload").files[0];
        if (!file) throw new ApiError(0, "data_jsonl: choose a JSONL file to upload");
        body.data_jsonl = await file.text();
      } else body.dataset = $("f-dataset").value;
    }
    if (kind === "eval" || kind === "meta-eval") { body.limit = numberOf("f-limit"); body.repeats = numberOf("f-repeats"); }
    if (kind === "regrade") body.source = textOf("f-source");
    if ($("f-profile").value) body.profile = $("f-profile").value;  // see docs/profiles.md
    if ($("f-batch").value !== "none") body.batch = $("f-batch").value;  // see docs/batch.md
    return Object.fromEntries(Object.entries(body).filter(([, v]) => v !== undefined));
  }

  $("new-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const error = $("new-error");
    error.textContent = "";
    $("f-submit").disabled = true;
    try {
      const job = await (await api(jobsPath(), { method: "POST", body: await jobBody() })).json();
      flash(`Created job ${job.name}.`, true);
      location.hash = `#/job/${encodeURIComponent(job.name)}`;
    } catch (e) {
      error.textContent = e.message;  // the API's own validation message
    } finally {
      $("f-submit").disabled = false;
    }
  });

  // --- one job ---------------------------------------------------------------------------------
  async function showJob(name) {
    show("job");
    let job, logs;
    try {
      job = await (await api(jobsPath(name))).json();
      logs = await (await api(jobsPath(name, "/logs"))).json();
    } catch (e) {
      if (e.status !== 401) { flash(`Could not open job ${name}: ${e.message}`, true); location.hash = "#/jobs"; }
      return;
    }
    const d = job.status_details;
    $("job-name").textContent = job.name;
    $("job-status").textContent = job.status;
    $("job-status").className = `status status-${job.status}`;
    $("job-kind").textContent = `· ${job.spec.kind || "eval"} · batch ${batchState(job)}`;
    $("job-description").textContent = job.description ? `· ${job.description}` : "";
    $("job-error").textContent = job.error || "";
    $("job-bar").style.width = `${Math.min(100, Number(d.progress || 0))}%`;
    $("job-details").replaceChildren(...progressCells(d).flatMap((t, i) => [el("dt", { text: LABELS[i] }), el("dd", { "data-field": LABELS[i], text: t })]));
    $("job-cancel").hidden = TERMINAL.has(job.status);
    $("job-delete").hidden = !TERMINAL.has(job.status);
    const logBox = $("job-logs");
    const atEnd = logBox.scrollTop + logBox.clientHeight >= logBox.scrollHeight - 4;
    logBox.textContent = logs.data.map((e) => `${e.at}  ${e.message}`).join("\n");
    if (atEnd) logBox.scrollTop = logBox.scrollHeight;
    const done = job.status === "completed";
    $("job-results").hidden = !done;
    if (done && $("job-results").dataset.job !== job.name) await fillResults(job);
    if (!TERMINAL.has(job.status)) poll(refresh);
  }

  async function fillResults(job) {
    $("job-results").dataset.job = job.name;
    $("job-judges").hidden = true;
    const hasReport = REPORT_KINDS.has(job.spec.kind || "eval");
    const isMeta = job.spec.kind === "meta-eval";  // its report: which judge to pay for (each judge's F1 and cost)
    $("job-report-link").hidden = !hasReport && !isMeta;
    $("job-report-link").textContent = isMeta ? "Which judge to pay for" : "Open the report";
    $("job-report-link").href = `#/job/${encodeURIComponent(job.name)}/report`;
    $("compare-form").hidden = !hasReport;
    const results = await (await api(jobsPath(job.name, "/results"))).json();
    await fillJudges(job, results.data.some((r) => r.name === "metrics"));
    $("job-downloads").replaceChildren(...results.data.map((r) => el("button", {
      type: "button", "data-result": r.name, text: `Download ${r.name}`,
      onclick: async () => {
        try {
          const ext = r.media_type === "application/jsonl" ? "jsonl" : "json";
          await saveAs(await api(jobsPath(job.name, `/results/${r.name}/download`)), `${job.name}_${r.name}.${ext}`);
        } catch (e) { flash(`Could not download ${r.name}: ${e.message}`); }
      },
    })));
    // every completed job, newest first, page by page (the picker reaches them all)
    const choices = [];
    for (let page = 1; ; page++) {
      const params = new URLSearchParams({ status: "completed", newest_first: "true", page: String(page), page_size: "500" });
      const others = await (await api(`${jobsPath()}?${params}`)).json();
      choices.push(...others.data.filter((j) => j.name !== job.name && REPORT_KINDS.has(j.spec.kind || "eval")));
      if (others.pagination.offset + others.data.length >= others.pagination.total || others.data.length === 0) break;
    }
    $("c-baseline").replaceChildren(...choices.map((j) => el("option", { value: j.name, text: `${j.name} (${(j.created_at || "").slice(0, 10)})` })));
    $("c-count").textContent = choices.length ? `${count(choices.length)} completed jobs, newest first` : "";
    $("c-submit").disabled = choices.length === 0;
    $("compare-none").hidden = choices.length > 0;
  }

  // a panel of judges' job: its members' own scores and how much they agree (from its metrics)
  async function fillJudges(job, hasMetrics) {
    if (!hasMetrics || (job.spec.kind || "eval").startsWith("meta-eval")) return;
    let metrics;
    try {
      metrics = await (await api(jobsPath(job.name, "/results/metrics/download"))).json();
    } catch (e) { return; }
    const members = Object.keys(metrics).map((k) => k.match(/^judge:(.+):overall_score$/)).filter(Boolean);
    if (!members.length) return;
    const num = (x) => (x === null || x === undefined ? "–" : Number(x).toFixed(3));
    $("judges-table").tBodies[0].replaceChildren(...members.map((m) => el("tr", {},
      el("th", { scope: "row", text: m[1] }), el("td", { "data-value": metrics[m[0]], text: num(metrics[m[0]]) }))));
    $("judges-line").textContent = `${members.length} judges · rule ${metrics.panel_rule} · panel score ${num(metrics.overall_score)} · ` +
      `judge_agreement ${num(metrics.judge_agreement)} · judge_fleiss_kappa ${num(metrics.judge_fleiss_kappa)}`;
    $("job-judges").hidden = false;
  }

  $("job-cancel").addEventListener("click", async () => { await cancelJob($("job-name").textContent); refresh(); });
  $("job-delete").addEventListener("click", async () => {
    if (await deleteJob($("job-name").textContent)) location.hash = "#/jobs";
  });
  $("compare-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const params = new URLSearchParams({ baseline: $("c-baseline").value });
    if ($("c-worse").value.trim()) params.set("fail_if_worse_by", $("c-worse").value.trim());
    if ($("c-noninf").value.trim()) params.set("require_non_inferiority", $("c-noninf").value.trim());
    location.hash = `#/job/${encodeURIComponent($("job-name").textContent)}/compare?${params}`;
  });

  // --- report and comparison pages -------------------------------------------------------------
  async function showPage(name, what, query) {
    show("page");
    releaseFrame();
    const back = `#/job/${encodeURIComponent(name)}`;
    $("page-back").href = back;
    $("page-error").textContent = "";
    const title = what === "report" ? `Report of ${name}` : `${name} against ${query.get("baseline")}`;
    $("page-h").textContent = title;
    $("page-frame").title = title;
    $("page-download").hidden = true;
    let blob;
    try {
      const response = await api(jobsPath(name, what === "report" ? "/report" : `/compare?${query}`));
      blob = new Blob([await response.arrayBuffer()], { type: "text/html" });
    } catch (e) {
      $("page-error").textContent = e.message;
      return;
    }
    frameUrl = URL.createObjectURL(blob);
    $("page-frame").src = frameUrl;
    $("page-download").href = frameUrl;
    $("page-download").download = what === "report" ? `${name}_report.html` : `${name}_vs_${query.get("baseline")}.html`;
    $("page-download").hidden = false;
  }

  // --- routing ---------------------------------------------------------------------------------
  let current = "";
  function refresh() { route(true); }
  async function route(again = false) {
    const hash = location.hash || "#/jobs";
    if (!again) { moved = true; if (!flashKeep) flash(""); flashKeep = false; stopPolling(); delete $("job-results").dataset.job; if (!hash.includes("/report") && !hash.includes("/compare")) releaseFrame(); }
    else if (hash !== current) return;
    current = hash;
    const { token, workspace } = session();
    $("who").hidden = !token;
    $("who-workspace").textContent = workspace || "";
    if (!token) { show("signin"); $("signin-token").focus(); return; }
    const [path, search = ""] = hash.slice(1).split("?");
    const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
    if (parts[0] === "new") { show("new"); syncKind(); if (!again) $("f-name").focus(); return; }
    if (parts[0] === "job" && parts[1]) {
      if (parts[2] === "report" || parts[2] === "compare") { if (!again) await showPage(parts[1], parts[2], new URLSearchParams(search)); return; }
      await showJob(parts[1]);
      return;
    }
    if (parts[0] === "signin") { location.hash = "#/jobs"; return; }
    await showJobs(parts[0] === "jobs" ? search : "");
  }
  window.addEventListener("hashchange", () => route());
  document.body.dataset.ready = "true";
  route();
})();
