// Rollout page: the conversation as the agent saw it, turn by turn, with every event in place,
// and two rollouts of one group side by side (?id=A&cmp=B).
"use strict";
const { el, link, api, fmt } = SV;

const FOLD = 800; // tool results longer than this are folded

async function main() {
  const p = SV.params();
  const id = p.get("id") || "";
  const cmp = p.get("cmp");
  SV.header([link("/", {}, "run"), el("span", { class: "mono" }, id), cmp ? el("span", { class: "mono" }, "vs " + cmp) : ""]);
  const mainEl = document.getElementById("main");
  let a, b;
  try {
    [a, b] = await Promise.all([api("/api/rollout/" + encodeURIComponent(id)), cmp ? api("/api/rollout/" + encodeURIComponent(cmp)) : null]);
  } catch (e) {
    return SV.fail(mainEl, e);
  }
  document.title = id + " · strands-art view";
  const advOf = (d) => (d.group.find((m) => m.rollout_id === d.rollout_id) || {}).advantage;
  mainEl.replaceChildren(
    el("h1", {}, b ? "Group comparison" : "Rollout ", b ? "" : el("span", { class: "mono" }, id)),
    groupCard(a, b),
    el("div", { class: "cols" + (b ? " two" : ""), id: "cols" }, column(a, advOf(a), !!b), b ? column(b, advOf(b), true) : ""),
  );
  const hashPos = location.hash.slice(1);
  if (hashPos) document.getElementById(hashPos)?.scrollIntoView();
}

function groupCard(a, b) {
  const rows = a.group.map((m) => el("tr", { "data-rollout": m.rollout_id },
    el("td", { class: "mono" }, m.rollout_id === a.rollout_id || (b && m.rollout_id === b.rollout_id) ? el("strong", {}, m.rollout_id) : link("/rollout", { id: m.rollout_id }, m.rollout_id)),
    el("td", { class: "num" }, SV.rewardCell(m.reward)),
    el("td", { class: "num" }, SV.advCell(m.advantage)),
    el("td", {}, m.stop_reason || "–"),
    el("td", {}, m.rollout_id === a.rollout_id ? "" : link("/rollout", { id: a.rollout_id, cmp: m.rollout_id }, "compare side by side"))));
  const zero = a.group.length && a.group[0].zero_variance;
  return el("section", { class: "card", id: "group" },
    el("h2", {}, "Group ", el("span", { class: "mono" }, a.group_id || "–"), zero ? el("span", { class: "chip zero" }, "zero variance: no learning signal") : ""),
    el("table", { class: "data" }, el("thead", {}, el("tr", {}, ["rollout", "reward", "advantage", "stop reason", ""].map((h) => el("th", { scope: "col" }, h)))), el("tbody", {}, rows)));
}

function column(d, adv, compact) {
  const r = d.result || {};
  const stat = (k, v) => el("div", { class: "stat" }, el("div", { class: "k" }, k), el("div", { class: "v" }, v));
  const rowsLinks = d.rows.map((row) => el("li", {}, link("/row", { id: d.rollout_id, row: row.index }, `row ${row.index}`),
    ` — ${fmt(row.tokens)} tokens, ${fmt(row.sampled)} sampled, turns ${row.turns.join(", ")}`));
  const evalBits = [];
  if (r.build_success !== undefined) evalBits.push(el("span", { class: "chip " + (r.build_success ? "good" : "bad") }, "build " + (r.build_success ? "pass" : "fail")));
  if (r.java17_bytecode !== undefined) evalBits.push(el("span", { class: "chip " + (r.java17_bytecode ? "good" : "bad") }, "Java 17 bytecode " + (r.java17_bytecode ? "yes" : "no")));
  if (r.tests_required !== undefined) evalBits.push(el("span", { class: "chip" }, `tests ${fmt(r.tests_run)}/${fmt(r.tests_required)}${r.tests_equivalent ? " equivalent" : ""}`));
  const evalLog = SV.link("/api/file", { path: "logs/" + d.rollout_id + ".eval.json" }, "evaluation log (JSON)");
  return el("div", { class: "col", "data-rollout": d.rollout_id },
    el("section", { class: "card" },
      compact ? el("h2", {}, el("a", { href: "/rollout?" + new URLSearchParams({ id: d.rollout_id }) }, d.rollout_id)) : "",
      el("div", { class: "stats" }, stat("reward", SV.rewardCell(d.reward)), stat("advantage", SV.advCell(adv)),
        stat("stop reason", r.stop_reason || d.metadata.stop_reason || "–"), stat("turns", fmt(d.turns.length)), stat("rows", fmt(d.rows.length))),
      el("p", {}, evalBits, " ", evalLog),
      r.error ? el("div", { class: "banner bad" }, "error: " + SV.textOf(r.error)) : "",
      el("ul", {}, rowsLinks),
      d.decoded ? "" : el("div", { class: "banner" }, "No tokenizer: sampled outputs are not decoded.")),
    tools(d.tools),
    d.turns.map((t) => turnCard(d, t)));
}

function tools(specs) {
  if (!specs.length) return "";
  return el("details", { class: "card" }, el("summary", {}, `tools offered (${specs.length}): ${specs.map((s) => SV.textOf(s.name)).join(", ")}`),
    specs.map((s) => el("div", {}, el("strong", { class: "mono" }, SV.textOf(s.name)), " ", el("span", { class: "muted" }, SV.textOf(s.description)))));
}

function turnCard(d, t) {
  const chips = [
    el("span", { class: "chip", title: "why sampling stopped" }, "stop: " + t.finish_reason),
    el("span", { class: "chip" }, `prompt ${fmt(t.prompt_tokens)} tok`),
    el("span", { class: "chip" }, `sampled ${fmt(t.sampled_tokens)} tok`),
    t.timings.total !== undefined ? el("span", { class: "chip", title: JSON.stringify(t.timings) }, `${t.timings.total.toFixed(2)} s`) : "",
    t.seed !== null ? el("span", { class: "chip" }, "seed " + t.seed) : "",
    el("span", { class: "chip" }, t.policy_version === null ? "policy v?" : "policy v" + t.policy_version),
    t.mean_logprob !== null ? el("span", { class: "chip", title: "mean logprob of the sampled tokens" }, "mean logprob " + t.mean_logprob.toFixed(3)) : "",
    t.ill_formed ? el("span", { class: "chip ill_formed" }, "ill-formed tool call") : "",
    t.tags.map((g) => el("span", { class: "chip" }, g)),
  ];
  const events = d.events.filter((e) => e.turn === t.index).map((e) => eventBox(d, e));
  const msgs = t.messages.map(message);
  const notes = [];
  for (const p of t.problems) notes.push(el("div", { class: "banner" }, "parse problem: " + SV.textOf(p)));
  for (const h of t.recovered) notes.push(el("div", { class: "banner" }, "recovered call: " + SV.textOf(h)));
  return el("article", { class: "turn", id: `turn-${d.rollout_id}-${t.index}`, "data-turn": t.index },
    el("div", { class: "head" }, el("span", { class: "t" }, "Turn " + t.index), chips, " ",
      link("/row", { id: d.rollout_id, row: t.row }, "row " + t.row)),
    el("div", { class: "body" },
      events,
      t.history_rewritten ? el("div", { class: "banner" }, "The harness rewrote earlier messages: this turn's whole conversation is shown.") : "",
      t.messages_from ? el("div", { class: "muted" }, `… ${t.messages_from} earlier message(s), then what is new at this turn:`) : "",
      msgs,
      el("div", { class: "msg assistant" }, el("div", { class: "role" }, "sampled by the policy (trained tokens)"),
        t.output_text === null ? el("p", { class: "muted" }, `${t.sampled_tokens} tokens (no tokenizer to decode them)`) : SV.pre(t.output_text, "sampled")),
      notes));
}

function partsText(content) {
  if (content === null || content === undefined) return "";
  if (typeof content === "string" || (content && content.truncated)) return content;
  if (Array.isArray(content)) {
    return content.map((p) => (p && typeof p === "object" ? (p.text !== undefined ? SV.textOf(p.text) : JSON.stringify(p)) : String(p))).join("\n");
  }
  return JSON.stringify(content);
}

function message(m) {
  // a message that is not an object (a hand-edited or foreign line): shown as its JSON
  if (!m || typeof m !== "object") m = { role: "?", content: typeof m === "string" ? m : JSON.stringify(m) };
  const role = SV.textOf(m.role);
  const body = [];
  const content = partsText(m.content);
  if (m.reasoning_content) body.push(el("div", { class: "muted" }, "reasoning"), SV.pre(m.reasoning_content, "reasoning"));
  const text = SV.textOf(content);
  const size = content && content.truncated ? content.size : text.length;  // the full size when cut
  if (text) {
    if (role === "tool" && text.length > FOLD) {
      body.push(el("details", {}, el("summary", {}, `tool result, ${size.toLocaleString()} characters (show)`), SV.pre(content)));
    } else if (role === "system" && text.length > FOLD) {
      body.push(el("details", {}, el("summary", {}, `system prompt, ${size.toLocaleString()} characters (show)`), SV.pre(content)));
    } else {
      body.push(SV.pre(content));
    }
  }
  const calls = Array.isArray(m.tool_calls) ? m.tool_calls : m.tool_calls ? [m.tool_calls] : [];
  for (const call of calls) {
    const c = call && typeof call === "object" ? call : { function: { name: "?", arguments: JSON.stringify(call) } };
    const f = c.function && typeof c.function === "object" ? c.function : c;
    let args = SV.textOf(f.arguments);
    try { args = JSON.stringify(JSON.parse(args), null, 2); } catch (e) { /* shown as sent */ }
    body.push(el("div", { class: "call" }, el("strong", {}, "call " + SV.textOf(f.name)), el("span", { class: "muted" }, "  " + SV.textOf(c.id || "")),
      el("pre", { class: "text" }, args), SV.truncNote(f.arguments)));
  }
  const label = role === "tool" ? "tool result" + (m.tool_call_id ? " · " + SV.textOf(m.tool_call_id) : "") : role === "assistant" ? "assistant (as the harness sent it back)" : role;
  return el("div", { class: "msg " + role.replace(/[^a-z]/g, "") }, el("div", { class: "role" }, label), body);
}

function eventBox(d, e) {
  const kind = String(e.kind);
  const pos = typeof e.position === "number" ? e.position : null;
  const where = (e.at || []).map(([row, p]) => link("/row", { id: d.rollout_id, row, pos: p }, `row ${row} @ token ${p}`));
  const head = el("div", {}, el("span", { class: "chip " + kind }, kind), " ",
    el("strong", {}, SV.textOf(e.reason)), pos !== null ? el("span", { class: "muted" }, ` · token index ${pos}`) : "",
    where.length ? el("span", { class: "muted" }, " · ") : "", where.flatMap((w, i) => (i ? [", ", w] : [w])));
  const body = [];
  if (e.row_text !== undefined) {
    body.push(el("div", { class: "pair" },
      el("div", {}, el("div", { class: "lbl" }, "the row: what was sampled"), SV.pre(e.row_text)),
      el("div", {}, el("div", { class: "lbl" }, "the next prompt: what the re-render gave"), SV.pre(e.prompt_text))));
  } else if (e.previous || e.incoming) {
    body.push(el("div", { class: "pair" },
      el("div", {}, el("div", { class: "lbl" }, "row tokens"), SV.pre(JSON.stringify(e.previous))),
      el("div", {}, el("div", { class: "lbl" }, "prompt tokens"), SV.pre(JSON.stringify(e.incoming)))));
  }
  const extra = Object.entries(e).filter(([k]) => !["kind", "reason", "turn", "position", "row_text", "prompt_text", "previous", "incoming", "at"].includes(k));
  if (extra.length) body.push(el("div", { class: "muted mono" }, extra.map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`).join("  ")));
  return el("div", { class: "event " + kind, "data-kind": kind, "data-pos": pos === null ? "" : pos }, head, body);
}

SV.start(main);
