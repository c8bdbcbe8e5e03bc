// Run page: configuration, results table, reward distribution, groups with GRPO advantages,
// training plots, and the live state (polls /api/live every 2 s).
"use strict";
const { el, link, api, fmt } = SV;

const state = { sort: "", desc: false, task: "", stop: "", event: "", q: "", split: "", batch: "", offset: 0, limit: 50, gOffset: 0, gLimit: 24 };
let version = null;
let runInfo = null;

const COLUMNS = [
  ["rollout_id", "rollout"], ["task", "task"], ["reward", "reward"], ["advantage", "advantage"],
  [null, "build"], [null, "tests"], ["turns", "turns"], ["rows", "rows"], ["tokens", "tokens (sampled)"],
  ["stop_reason", "stop reason"], [null, "events"], [null, "policy"], ["wall_s", "wall time"],
];

function query(extra) {
  const p = new URLSearchParams();
  for (const k of ["sort", "task", "stop", "event", "q", "split", "batch"]) if (state[k]) p.set(k, state[k]);
  if (state.desc) p.set("desc", "1");
  for (const [k, v] of Object.entries(extra)) p.set(k, v);
  return p.toString();
}

function slot(id) {
  return document.getElementById(id);
}

async function main() {
  const params = SV.params();
  for (const k of ["split", "batch", "task"]) if (params.get(k)) state[k] = params.get(k);
  SV.header([link("/", {}, "run")]);
  const mainEl = document.getElementById("main");
  let first;
  try {
    // everything the first paint needs, in parallel
    [runInfo, first] = await Promise.all([api("/api/run"), fetchLists(), api("/api/live").then((l) => { version = JSON.stringify(l.version); })]);
  } catch (e) {
    return SV.fail(mainEl, e);
  }
  document.title = runInfo.name + " · strands-art view";
  mainEl.replaceChildren(
    el("h1", {}, "Run ", el("span", { class: "mono" }, runInfo.name)),
    el("div", { id: "problems" }),
    el("section", { class: "card" }, el("div", { class: "stats", id: "stats" })),
    el("section", { class: "card", id: "inflight-card", hidden: true }, el("h2", {}, "In flight"), el("ul", { class: "inflight", id: "inflight" })),
    el("div", { class: "grid2" },
      el("section", { class: "card" }, el("h2", {}, "Reward distribution"), el("div", { id: "hist" })),
      el("section", { class: "card" }, el("h2", {}, "Configuration"), el("div", { id: "config" }))),
    el("section", { class: "card", id: "batches-card", hidden: true }, el("h2", {}, "Outer batches"),
      el("p", { class: "muted" }, "One row per outer batch: what was sampled, what was left out of GRPO and why, what the update cost. Click a batch to list its rollouts and groups; held-out evaluations below."),
      el("div", { id: "batches" }), el("div", { id: "evals" })),
    el("section", { class: "card", id: "metrics-card", hidden: true }, el("h2", {}, "Training, per outer batch"), el("div", { class: "plots", id: "plots" })),
    el("section", { class: "card" }, el("h2", {}, "Rollouts"), el("div", { class: "controls", id: "controls" }),
      el("div", { id: "table" }), el("div", { class: "pager", id: "pager" })),
    el("section", { class: "card" }, el("h2", {}, "Groups (GRPO)"),
      el("p", { class: "muted" }, "Rollouts of one task form a group; each rollout's advantage is its reward against the group's. A zero-variance group (all rewards equal) gives no learning signal."),
      el("div", { id: "groups" }), el("div", { class: "pager", id: "gpager" })),
  );
  renderConfig(runInfo.config, runInfo.code || []);
  renderProblems(runInfo);
  if (runInfo.runs && runInfo.runs.length > 1) slot("problems").after(el("p", {}, link("/compare", { run: "" }, `compare the ${runInfo.runs.length} runs side by side`)));
  if (runInfo.has_metrics) renderMetrics();
  if (runInfo.training) await renderBatches();
  await refresh(true, first);
  performance.mark("run-rendered"); // read by bench/viewer.py
  setInterval(poll, 2000);
}

function renderProblems(info) {
  const out = [];
  const p = info.problems || {};
  if (p.torn_results_bytes) out.push(`results.jsonl ends in a torn line (${p.torn_results_bytes} bytes without a newline): a rollout being written, or a killed run. It is not shown.`);
  if (p.unreadable_results) out.push(`${p.unreadable_results} unreadable line(s) in results.jsonl were skipped.`);
  if (p.torn_trajectory_bytes) out.push(`trajectories.jsonl ends in a torn line (${p.torn_trajectory_bytes} bytes): not shown.`);
  if (p.unreadable_trajectories) out.push(`${p.unreadable_trajectories} unreadable trajectory line(s) were skipped.`);
  if ((info.missing_parts || []).length) out.push(`Parquet part missing for ${info.missing_parts.length} rollout(s): ${info.missing_parts.slice(0, 8).join(", ")}${info.missing_parts.length > 8 ? " …" : ""} (their rows are shown from the JSONL copy).`);
  if (!info.decoded) out.push("No tokenizer loaded: tokens are shown as IDs (restart with --tokenizer NAME).");
  for (const [name, why] of Object.entries(info.trained_problems || {})) out.push(name ? `rows/${name} is unreadable (${why}): that batch's advantages are not shown.` : `rows/ is ${why}: no batch's advantages are shown.`);
  slot("problems").replaceChildren(...out.map((t) => el("div", { class: "banner", role: "status" }, t)));
}

function renderConfig(cfg, code) {
  if (!cfg) return slot("config").replaceChildren(el("p", { class: "muted" }, "no config.json"), ...renderCode(code));
  const keys = ["env", "model", "backend", "history_mode", "tasks", "rollouts_per_task", "outer_batches", "prompt_batch", "rollouts_per_prompt", "seed", "lr", "temperature", "max_turns", "max_new_tokens", "max_staleness", "concurrency"];
  const row = (k) => el("tr", {}, el("td", {}, k), el("td", { class: "mono" }, SV.textOf(typeof cfg[k] === "string" ? cfg[k] : JSON.stringify(cfg[k]))));
  const main = keys.filter((k) => k in cfg);
  const rest = Object.keys(cfg).filter((k) => !main.includes(k)).sort();
  slot("config").replaceChildren(
    el("table", { class: "kv" }, main.map(row)),
    el("details", {}, el("summary", {}, `all ${Object.keys(cfg).length} settings`), el("table", { class: "kv" }, rest.map(row))),
    ...renderCode(code),
  );
}

// code.jsonl: one line per process that trained the run (strands_art/training/provenance.py)
function renderCode(code) {
  if (!code.length) return [];
  const str = (v) => (v === null || v === undefined ? "unknown" : SV.textOf(v));
  const commit = (c) => (typeof c.commit === "string" ? c.commit.slice(0, 10) : "unknown") + (c.dirty === true ? " + uncommitted changes" : c.dirty === null && c.commit ? " (changes unknown)" : "");
  const commits = new Set(code.map((c) => (typeof c.commit === "string" ? c.commit : null)));
  const notes = [];
  if (commits.size > 1) notes.push(`trained by ${commits.size} different commits: read its numbers per process`);
  if (code.some((c) => c.dirty === true)) notes.push("a process ran with uncommitted changes");
  const head = el("tr", {}, ["started", "from outer batch", "commit", "strands-art", "python", "torch"].map((h) => el("th", {}, h)));
  const rows = code.map((c) => el("tr", {}, el("td", {}, str(c.at) + (c.resume ? " (resume)" : "")), el("td", {}, str(c.from_batch)), el("td", { class: "mono" }, commit(c)), el("td", {}, str(c.strands_art)), el("td", {}, str(c.python)), el("td", {}, str(c.torch))));
  return [el("h3", {}, "Code that trained it"), ...notes.map((t) => el("p", { class: "banner", role: "status" }, t)), el("table", { class: "code" }, head, ...rows)];
}

async function renderMetrics() {
  let recs, skipped;
  try {
    ({ records: recs, unreadable_lines: skipped } = await api("/api/metrics"));
  } catch (e) {
    return;
  }
  const train = recs.filter((r) => r.kind === "train");
  const evals = recs.filter((r) => r.kind === "eval");
  slot("metrics-card").hidden = false;
  const pts = (rs, k, off) => rs.filter((r) => typeof r[k] === "number").map((r) => [r.outer_batch + off, r[k]]);
  const plots = [
    ["reward", [{ name: "training reward", points: pts(train, "reward_mean", 1) }, { name: "held-out reward", points: pts(evals, "val_reward", 0), cls: "series2" }]],
    ["loss", [{ name: "loss", points: pts(train, "loss", 1) }]],
    ["KL (approx)", [{ name: "approx_kl", points: pts(train, "approx_kl", 1) }, { name: "kl_ref", points: pts(train, "kl_ref", 1), cls: "series2" }]],
    ["clip fraction", [{ name: "clip_fraction", points: pts(train, "clip_fraction", 1) }]],
    ["grad norm", [{ name: "grad_norm", points: pts(train, "grad_norm", 1) }]],
    ["learning rate", [{ name: "lr", points: pts(train, "lr", 1) }]],
    ["rows per rollout", [{ name: "rows_per_rollout", points: pts(train, "rows_per_rollout", 1) }]],
    ["zero-variance groups", [{ name: "zero_advantage_groups", points: pts(train, "zero_advantage_groups", 1) }]],
    ["held-out success", [{ name: "val_success", points: pts(evals, "val_success", 0) }]],
    ["seconds per phase", [{ name: "rollouts", points: pts(train, "rollout_s", 1) }, { name: "update", points: pts(train, train.some((r) => typeof r.actor_update_s === "number") ? "actor_update_s" : "train_s", 1), cls: "series2" }]],
    ["evaluation seconds", [{ name: "eval_s", points: pts(evals, "eval_s", 0) }]],
  ];
  const note = skipped ? [el("div", { class: "banner", role: "status" }, `${skipped} unreadable line(s) in metrics.jsonl were skipped.`)] : [];
  slot("plots").replaceChildren(...note, ...plots.map(([title, series]) =>
    el("div", { class: "plot" }, el("h3", {}, title, series.length > 1 && series[1].points.length ? el("span", { class: "muted" }, "  (solid: " + series[0].name + ", dashed: " + series[1].name + ")") : ""),
      SV.lineChart(series, { title, xlabel: "outer batches trained" }))));
}

const dash = (x, d) => (x === null || x === undefined ? "—" : fmt(x, d));
const secs = (x) => (typeof x === "number" ? x.toFixed(1) + " s" : "—");

async function renderBatches() {
  let data;
  try {
    data = await api("/api/batches");
  } catch (e) {
    return SV.fail(slot("batches"), e);
  }
  slot("batches-card").hidden = false;
  const heads = ["batch", "reward", "held-out after", "rollouts", "left out of GRPO", "tied groups", "rows", "row tokens (sampled)", "processed tokens", "optimizer steps", "rollouts s", "update s", "e2e s"];
  const rows = data.batches.map((b) => el("tr", { "data-batch": b.outer_batch, class: String(b.outer_batch) === state.batch ? "sel" : "" },
    el("td", {}, el("button", { type: "button", class: "btn", onclick: () => pickBatch(String(b.outer_batch)) }, "b" + b.outer_batch), b.trained ? "" : el("span", { class: "chip", title: "rollouts stored, update not finished" }, "not trained yet")),
    el("td", { class: "num" }, SV.rewardCell(b.reward_mean)),
    el("td", { class: "num" }, dash(b.val_reward), b.held_out_stored ? el("div", {}, link("/", { split: "eval", batch: b.outer_batch + 1 }, `${b.held_out_stored} held-out`)) : ""),
    el("td", { class: "num" }, `${fmt(b.stored)}`, b.stored_failed ? el("span", { class: "chip bad" }, `${b.stored_failed} failed`) : ""),
    el("td", {}, Object.keys(b.excluded).length || b.groups_dropped || skippedTied(b) ? [
      Object.entries(b.excluded).map(([k, n]) => el("span", { class: "chip bad", title: k }, `${k} ×${n}`)),
      b.groups_dropped ? el("span", { class: "chip zero", title: `dynamic sampling: ${fmt(b.groups_drawn)} groups drawn, ${fmt(b.groups_dropped)} not kept (tied; the batch keeps --prompt-batch groups)` }, `${fmt(b.groups_dropped)} groups dropped`) : "",
      skippedTied(b) ? el("span", { class: "chip zero", title: "--skip-tied: tasks whose last group tied were not drawn" }, `${skippedTied(b)} tasks skipped (tied before)`) : "",
    ] : "—"),
    el("td", {}, b.tied_groups.length ? el("span", { class: "chip zero", title: b.tied_groups.join(", ") }, `${b.tied_groups.length} tied`) : "—"),
    el("td", { class: "num" }, dash(b.rows)),
    el("td", { class: "num", title: "tokens of the batch's rows, context included (the loss-mask tokens: trained)" }, dash(b.tokens), b.sampled_tokens !== null ? ` (${dash(b.sampled_tokens)})` : ""),
    el("td", { class: "num" }, dash(b.processed_tokens)),
    el("td", { class: "num" }, dash(b.optimizer_steps)),
    el("td", { class: "num" }, secs(b.rollout_s)),
    el("td", { class: "num", title: "actor update (forward, backward, optimizer); train_s where the run has no actor_update_s" }, secs(b.actor_update_s ?? b.train_s)),
    el("td", { class: "num" }, secs(b.e2e_s)),
  ));
  slot("batches").replaceChildren(data.batches.length
    ? el("table", { class: "data", id: "batch-table" }, el("thead", {}, el("tr", {}, heads.map((h) => el("th", { scope: "col" }, h)))), el("tbody", {}, rows))
    : el("p", { class: "muted" }, "No outer batch has been sampled yet."));
  slot("evals").replaceChildren(el("h3", {}, "Held-out evaluations"), data.evals.length ? el("ul", { id: "eval-list" }, data.evals.map((e) => el("li", {},
    `after ${e.outer_batch} outer batch${e.outer_batch === 1 ? "" : "es"}: reward ${dash(e.val_reward)}`, e.val_success !== null ? `, success ${dash(e.val_success)}` : "",
    ` (${dash(e.val_rollouts)} rollouts, ${secs(e.eval_s)}) `, e.stored ? link("/", { split: "eval", batch: e.outer_batch }, `open its ${e.stored} rollouts`) : el("span", { class: "muted" }, "rollouts not stored")))) : el("p", { class: "muted" }, "none yet"));
}

function skippedTied(b) {
  return (b.skipped_tied_at_0 || 0) + (b.skipped_tied_at_1 || 0) + (b.skipped_tied_mixed || 0);
}

function pickBatch(b) {
  state.batch = state.batch === b && state.split === "train" ? "" : b;
  state.split = state.batch ? "train" : "";
  state.offset = 0; state.gOffset = 0;
  for (const tr of document.querySelectorAll("#batch-table tr[data-batch]")) tr.classList.toggle("sel", tr.dataset.batch === state.batch);
  syncControls();
  refresh();
}

function syncControls() {
  for (const k of ["split", "batch"]) {
    const s = document.querySelector(`select[data-key="${k}"]`);
    if (s) s.value = state[k];
  }
}

function fetchLists() {
  return Promise.all([
    api("/api/rollouts?" + query({ offset: state.offset, limit: state.limit })),
    api("/api/groups?" + query({ offset: state.gOffset, limit: state.gLimit })),
  ]);
}

async function refresh(first, lists) {
  let data, groups;
  try {
    [data, groups] = lists || (await fetchLists());
  } catch (e) {
    return SV.fail(slot("table"), e);
  }
  renderStats(data, groups);
  slot("hist").replaceChildren(data.reward_hist.length ? SV.barChart(data.reward_hist, "reward distribution") : el("p", { class: "muted" }, "no rewards yet"));
  if (first) { renderControls(data); syncControls(); }
  renderTable(data);
  renderGroups(groups);
}

function renderStats(data, groups) {
  const stat = (k, v, id) => el("div", { class: "stat" }, el("div", { class: "k" }, k), el("div", { class: "v", id }, v));
  slot("stats").replaceChildren(
    stat("rollouts", fmt(data.all), "stat-rollouts"),
    stat("mean reward", fmt(data.reward_mean, 3)),
    stat("groups", fmt(groups.total)),
    stat("zero-variance groups", fmt(groups.zero_variance)),
    stat("tokens", fmt(data.tokens)),
    stat("sampled tokens", fmt(data.sampled_tokens)),
  );
}

function select(label, key, options) {
  const s = el("select", { "aria-label": label, "data-key": key, onchange: (e) => { state[key] = e.target.value; state.offset = 0; state.gOffset = 0; refresh(); } },
    el("option", { value: "" }, "all"), options.map((o) => el("option", { value: o }, o)));
  s.value = state[key];
  return el("label", {}, label, s);
}

function renderControls(data) {
  const search = el("input", { type: "search", placeholder: "rollout id contains…", "aria-label": "search rollout id",
    oninput: (e) => { state.q = e.target.value; state.offset = 0; refresh(); } });
  const training = runInfo && runInfo.training;
  slot("controls").replaceChildren(
    training ? select("outer batch", "batch", data.batches.map(String)) : "", training ? select("split", "split", ["train", "eval"]) : "",
    select(training ? "group" : "task", "task", data.tasks), select("stop reason", "stop", data.stop_reasons),
    select("event", "event", data.event_kinds), search,
  );
}

const CELLS = {
  rollout: (r) => el("td", { class: "mono" }, r.stored ? link("/rollout", { id: r.rollout_id }, r.rollout_id) : el("span", { title: "no stored trajectory" }, SV.textOf(r.rollout_id)), r.failed ? el("span", { class: "chip bad" }, "failed") : ""),
  batch: (r) => el("td", {}, r.outer_batch === null || r.outer_batch === undefined ? "–" : (r.split === "eval" ? "held-out after " + r.outer_batch : "b" + r.outer_batch)),
  task: (r) => el("td", {}, r.task || r.group),
  reward: (r) => el("td", { class: "num" }, SV.rewardCell(r.reward)),
  advantage: (r) => el("td", { class: "num" }, SV.advCell(r.advantage), r.zero_variance ? el("span", { class: "chip zero", title: "every reward in this group is equal" }, "zero-var") : "",
    r.excluded ? el("div", { class: "chip bad", title: SV.textOf(r.excluded) }, "left out: " + SV.textOf(r.excluded).slice(0, 60)) : ""),
  build: (r) => el("td", {}, r.build_success === undefined ? "–" : r.build_success ? el("span", { class: "chip good" }, "pass") : el("span", { class: "chip bad" }, "fail")),
  tests: (r) => el("td", {}, r.tests_required === undefined ? "–" : `${fmt(r.tests_run)}/${fmt(r.tests_required)}${r.tests_equivalent ? " ✓" : ""}`),
  turns: (r) => el("td", { class: "num" }, fmt(r.turns)),
  rows: (r) => el("td", { class: "num" }, fmt(r.rows)),
  "tokens (sampled)": (r) => el("td", { class: "num" }, r.tokens === undefined ? "–" : `${fmt(r.tokens)} (${fmt(r.sampled_tokens)})`),
  "stop reason": (r) => el("td", {}, r.stop_reason || "–", r.error ? el("div", { class: "muted", title: SV.textOf(r.error) }, SV.textOf(r.error).slice(0, 80)) : ""),
  events: (r) => el("td", {}, SV.eventChips(r.events), r.part_missing ? el("span", { class: "chip bad" }, "part missing") : ""),
  policy: (r) => el("td", { class: "mono" }, (r.policy_versions || []).length ? "v" + r.policy_versions.join(",") : "–"),
  "wall time": (r) => el("td", { class: "num" }, typeof r.wall_s === "number" ? r.wall_s.toFixed(1) + " s" : "–"),
};

function renderTable(data) {
  const training = runInfo && runInfo.training;
  const cols = training
    ? [["rollout_id", "rollout"], ["outer_batch", "batch"], ["task", "task"], ...COLUMNS.slice(2).filter(([, l]) => l !== "build" && l !== "tests")]
    : COLUMNS;
  const head = el("tr", {}, cols.map(([key, label]) => {
    if (!key) return el("th", { scope: "col" }, label);
    const sorted = state.sort === key ? (state.desc ? "descending" : "ascending") : "none";
    return el("th", { scope: "col", "aria-sort": sorted },
      el("button", { type: "button", onclick: () => { if (state.sort === key) state.desc = !state.desc; else { state.sort = key; state.desc = key === "reward" || key === "advantage"; } refresh(); } }, training && label === "task" ? "group" : label));
  }));
  const rows = data.items.map((r) => el("tr", { "data-rollout": SV.textOf(r.rollout_id), "data-split": r.split || "" }, cols.map(([, label]) => CELLS[label](r))));
  slot("table").replaceChildren(
    data.total ? el("table", { class: "data", id: "rollouts" }, el("thead", {}, head), el("tbody", {}, rows))
      : el("p", { class: "muted" }, data.all ? "No rollout matches the filters." : "No rollout has finished yet."));
  pager("pager", data.total, state.offset, state.limit, (o) => { state.offset = o; refresh(); });
}

function pager(id, total, offset, limit, go) {
  const parts = [el("span", { class: "muted" }, total ? `${offset + 1}–${Math.min(total, offset + limit)} of ${total}` : "")];
  if (offset > 0) parts.push(el("button", { class: "btn", type: "button", onclick: () => go(Math.max(0, offset - limit)) }, "‹ previous"));
  if (offset + limit < total) parts.push(el("button", { class: "btn", type: "button", onclick: () => go(offset + limit) }, "next ›"));
  slot(id).replaceChildren(...parts);
}

function renderGroups(groups) {
  const cards = groups.items.map((g) => {
    const rewards = g.members.map((m) => m.reward).filter((x) => typeof x === "number");
    const lo = Math.min(0, ...rewards), hi = Math.max(1, ...rewards);
    const ids = g.members.map((m) => m.rollout_id);
    return el("div", { class: "group" + (g.zero_variance ? " zero" : ""), "data-group": g.group },
      el("div", { class: "title" }, el("strong", {}, g.group),
        g.zero_variance ? el("span", { class: "chip zero" }, "zero variance") : ids.length >= 2 ? link("/rollout", { id: bestWorst(g.members)[0], cmp: bestWorst(g.members)[1] }, "compare best vs worst") : ""),
      g.members.map((m) => {
        const w = typeof m.reward === "number" ? ((m.reward - lo) / (hi - lo)) * 100 : 0;
        const bar = el("span", {});
        bar.style.left = "0"; bar.style.width = w.toFixed(1) + "%"; bar.style.background = m.reward >= 1 ? "#1f8a4c" : m.reward > 0 ? "#b7791f" : "#c0392b";
        return el("div", { class: "member" }, link("/rollout", { id: SV.textOf(m.rollout_id) }, SV.textOf(m.rollout_id)), SV.rewardCell(m.reward), SV.advCell(m.advantage), el("div", { class: "bar" }, bar),
          m.excluded ? el("span", { class: "chip bad", title: SV.textOf(m.excluded) }, "left out") : "");
      }));
  });
  slot("groups").replaceChildren(el("div", { class: "groups" }, cards));
  pager("gpager", groups.total, state.gOffset, state.gLimit, (o) => { state.gOffset = o; refresh(); });
}

function bestWorst(members) {
  const ok = members.filter((m) => typeof m.reward === "number");
  ok.sort((a, b) => b.reward - a.reward);
  return ok.length >= 2 ? [ok[0].rollout_id, ok[ok.length - 1].rollout_id] : [members[0].rollout_id, members[1].rollout_id];
}

async function poll() {
  let live;
  try {
    live = await api("/api/live");
  } catch (e) {
    slot("live-state").textContent = "server unreachable";
    slot("live-state").classList.remove("on");
    return;
  }
  const v = JSON.stringify(live.version);
  const changed = v !== version;
  version = v;
  const flying = live.inflight || [];
  slot("live-state").textContent = `${live.rollouts} rollouts · ${flying.length} in flight · checked ${new Date().toLocaleTimeString()}`;
  slot("live-state").classList.toggle("on", flying.length > 0 || changed);
  slot("inflight-card").hidden = !flying.length;
  const now = Date.now() / 1000;
  slot("inflight").replaceChildren(...flying.map((f) => el("li", {},
    `${SV.textOf(f.rollout_id)}  turn ${fmt(f.turn)}  ${SV.textOf(f.last_call || "")}  ${typeof f.started === "number" ? Math.max(0, Math.round(now - f.started)) + " s" : ""}`)));
  if (changed) {
    runInfo = await api("/api/run").catch(() => runInfo);
    renderProblems(runInfo);
    await refresh();
    if (runInfo.has_metrics) renderMetrics();
  }
}

SV.start(main);
