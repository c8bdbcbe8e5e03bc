// Compare page (strands-art view RUN_A RUN_B ...): per outer batch and in total, rows,
// processed tokens, actor-update seconds, optimizer steps, end-to-end seconds and held-out
// reward of every run, with the difference in % against the first; plots; and rollout by
// rollout (same ids: same task and seed) where one run forked and another healed.
"use strict";
const { el, link, api, fmt } = SV;

const LABELS = {
  rows: "rows", processed_tokens: "processed tokens", actor_update_s: "actor update s", optimizer_steps: "optimizer steps",
  e2e_s: "end-to-end s", rollout_s: "rollouts s", eval_s: "evaluation s", val_reward: "held-out reward",
};
const dash = (x, d) => (x === null || x === undefined ? "—" : fmt(x, d));
const pct = (x) => (x === null || x === undefined ? "" : `${x > 0 ? "+" : ""}${x.toFixed(1)} %`);

async function main() {
  SV.header([link("/", { run: "" }, "run"), el("span", {}, "compare")]);
  const mainEl = document.getElementById("main");
  let data;
  try {
    data = await api("/api/compare");
  } catch (e) {
    return SV.fail(mainEl, e);
  }
  document.title = "compare · strands-art view";
  const runs = data.runs;
  const keys = [...data.keys, "val_reward"];
  mainEl.replaceChildren(
    el("h1", {}, `${runs.length} runs side by side`),
    runs.length < 2 ? el("div", { class: "banner" }, "One run only: start the viewer with several, strands-art view RUN_A RUN_B.") : "",
    el("section", { class: "card" }, el("h2", {}, "Totals"),
      el("p", { class: "muted" }, "Sums over the outer batches of each run (a dash where a batch lacks the key); evaluation s: the held-out evaluations after batches, the one before training left out; held-out reward: the last evaluation. % against the first run."),
      totals(runs, keys), trained(runs), codeNote(runs)),
    el("section", { class: "card" }, el("h2", {}, "Per outer batch"), el("div", { class: "plots" }, keys.map((k) => plot(runs, k)))),
    el("section", { class: "card" }, el("h2", {}, "Per outer batch, values"), perBatch(runs, keys)),
    el("section", { class: "card" }, el("h2", {}, "Rollout by rollout"),
      el("p", { class: "muted" }, "Rollouts with the same id in several runs (same task, outer batch and seed): where one run forked (tree) and another healed (linear). Those that differ come first."),
      el("div", { id: "pairs" }, el("p", { class: "muted" }, "Loading…"))),
  );
  document.body.dataset.ready = "1";
  pairs(runs).catch((e) => SV.fail(document.getElementById("pairs"), e));
}

function totals(runs, keys) {
  const head = el("tr", {}, el("th", { scope: "col" }, ""), runs.map((r, i) => el("th", { scope: "col", class: "mono" }, link("/", { run: String(i) }, r.name))));
  const body = keys.map((k) => el("tr", { "data-key": k }, el("th", { scope: "row" }, LABELS[k] || k),
    runs.map((r, i) => el("td", { class: "num", "data-run": i, "data-value": r.total[k] === null ? "" : r.total[k] },
      dash(r.total[k], k === "val_reward" ? 3 : 1), i ? el("span", { class: "muted pct" }, " " + pct(r.total_pct[k])) : ""))));
  return el("table", { class: "data", id: "totals" }, el("thead", {}, head), el("tbody", {}, body));
}

function trained(runs) {
  // the trainer's totals over the batches where both runs ran a pass (bench/seed_tables.py's rule)
  return el("p", { class: "muted", id: "trained-pct" }, runs.slice(1).map((r) => r.trained_batches
    ? `${r.name} against ${runs[0].name}, over the ${r.trained_batches} outer batch(es) where both ran a pass: processed tokens ${pct(r.trained_pct.processed_tokens)}, actor update s ${pct(r.trained_pct.actor_update_s)}. `
    : `${r.name}: no outer batch where both it and ${runs[0].name} ran a pass (their groups tied). `));
}

function codeNote(runs) {
  // the commits that trained each run (code.jsonl): runs of different code are said, not hidden
  const short = (c) => (typeof c === "string" ? c.slice(0, 10) : "unknown");
  const of = runs.map((r) => (r.commits || []).map(short).join(" then "));
  if (of.every((c) => !c)) return "";
  const same = of.every((c) => c === of[0]) && !of[0].includes(" then ");
  if (same) return el("p", { class: "muted", id: "code-note" }, `Every run was trained by commit ${of[0]}.`);
  return el("div", { class: "banner", id: "code-note", role: "status" }, "These runs were trained by different code: ",
    runs.map((r, i) => `${r.name}: ${of[i] || "not recorded"}`).join("; "), ".");
}

function plot(runs, k) {
  const cls = ["series", "series2", "series3", "series4"];
  const series = runs.map((r, i) => ({ name: r.name, cls: cls[i % cls.length], points: r.batches.filter((b) => typeof b[k] === "number").map((b) => [b.outer_batch, b[k]]) }));
  return el("div", { class: "plot" }, el("h3", {}, LABELS[k] || k), SV.lineChart(series, { title: LABELS[k] || k, xlabel: "outer batch" }),
    el("div", { class: "muted" }, runs.map((r, i) => el("span", { class: "legend-run " + cls[i % cls.length] }, `${["solid", "dashed", "dotted", "dash-dot"][i % 4]}: ${r.name}  `))));
}

function perBatch(runs, keys) {
  // the batches the runs have (not every number below the last: a run may name batch 10^9)
  const numbers = [...new Set(runs.flatMap((r) => r.batches.map((x) => x.outer_batch)))].sort((a, b) => a - b);
  const head = el("tr", {}, el("th", { scope: "col" }, "batch"), el("th", { scope: "col" }, "run"), keys.map((k) => el("th", { scope: "col" }, LABELS[k] || k)));
  const rows = [];
  for (const b of numbers) {
    runs.forEach((r, i) => {
      const rec = r.batches.find((x) => x.outer_batch === b);
      rows.push(el("tr", { "data-batch": b, "data-run": i }, el("td", {}, i ? "" : "b" + b), el("td", { class: "mono" }, r.name),
        keys.map((k) => el("td", { class: "num" }, rec ? dash(rec[k], k === "val_reward" ? 3 : 1) : "—", rec && i ? el("span", { class: "muted pct" }, " " + pct(rec.pct[k])) : ""))));
    });
  }
  return el("table", { class: "data", id: "per-batch" }, el("thead", {}, head), el("tbody", {}, rows));
}

async function pairs(runs) {
  // every rollout of each run, 1,000 a request (the API's limit): a larger run is read in pages
  const all = async (i) => {
    const items = [];
    for (;;) {
      const page = await api(`/api/rollouts?run=${i}&limit=1000&offset=${items.length}&sort=rollout_id`);
      items.push(...page.items);
      if (!page.items.length || items.length >= page.total) return items;
    }
  };
  const lists = await Promise.all(runs.map((_, i) => all(i)));
  const byId = new Map();
  lists.forEach((items, i) => { for (const r of items) { if (!byId.has(r.rollout_id)) byId.set(r.rollout_id, []); byId.get(r.rollout_id)[i] = r; } });
  const shared = [...byId.entries()].filter(([, rs]) => rs.filter(Boolean).length >= 2);
  const sig = (r) => (r ? JSON.stringify(r.events || {}) + "|" + r.reward : "");
  const differs = ([, rs]) => new Set(rs.map(sig)).size > 1;
  shared.sort((a, b) => differs(b) - differs(a));
  const where = document.getElementById("pairs");
  if (!shared.length) return where.replaceChildren(el("p", { class: "muted" }, "No rollout id is in two of these runs (different tasks or seeds)."));
  const head = el("tr", {}, el("th", { scope: "col" }, "rollout"), runs.map((r) => el("th", { scope: "col", class: "mono" }, r.name)));
  const body = shared.slice(0, 300).map(([id, rs]) => el("tr", { "data-rollout": id, class: differs([id, rs]) ? "differs" : "" }, el("td", { class: "mono" }, id),
    runs.map((_, i) => el("td", {}, rs[i] ? [link("/rollout", { id, run: String(i) }, SV.rewardCell(rs[i].reward)), " ", SV.eventChips(rs[i].events), rs[i].stored ? "" : el("span", { class: "muted" }, " not stored")] : "—"))));
  where.replaceChildren(el("table", { class: "data", id: "pairs-table" }, el("thead", {}, head), el("tbody", {}, body)),
    shared.length > 300 ? el("p", { class: "muted" }, `first 300 of ${shared.length}`) : "");
}

SV.start(main);
