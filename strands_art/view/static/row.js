// Row page: every token of one training row. Prompt vs sampled by the loss mask, sampled tokens
// shaded by logprob, special tokens and whitespace visible, turn / fork / heal markers. Only the
// lines on screen are in the DOM (a 32K-token row scrolls smoothly). Keyboard: focus the token
// pane, then ←/→ token, ↑/↓ line, PgUp/PgDn, Home/End, n/p next/previous marker.
"use strict";
const { el, link, api, fmt } = SV;

const LINE_H = 20;
const OVERSCAN = 10;
let D = null;           // the row payload
let disp = [];          // display string per token
let lines = [];         // start token index of each visual line
let lineOf = null;      // Int32Array: line of each token
let markersAt = new Map(); // token index -> [marker]
let cur = -1;
let pane, layer, inspector;
let mode = "sampler";   // what sampled tokens are shaded by (the "shade by" select)
let T = null;           // D.trained when it holds the per-token lists

async function main() {
  const p = SV.params();
  const id = p.get("id") || "";
  const row = p.get("row") || "0";
  SV.header([link("/", {}, "run"), link("/rollout", { id }, id), el("span", {}, "row " + row)]);
  const mainEl = document.getElementById("main");
  try {
    D = await api(`/api/rollout/${encodeURIComponent(id)}/row/${encodeURIComponent(row)}`);
  } catch (e) {
    return SV.fail(mainEl, e);
  }
  document.title = `${id} row ${row} · strands-art view`;
  const special = new Set(D.special || []);
  disp = D.ids.map((t) => {
    const text = D.texts ? D.texts[String(t)] : null;
    return text === null || text === undefined ? `#${t} ` : SV.visible(text);
  });
  D.isSpecial = D.ids.map((t) => special.has(t));
  for (const m of D.markers) {
    if (!markersAt.has(m.pos)) markersAt.set(m.pos, []);
    markersAt.get(m.pos).push(m);
  }
  pane = el("div", { class: "tokens", id: "tokens", tabindex: "0", role: "application",
    "aria-label": "tokens of the row; arrow keys move between tokens, n and p between markers" });
  layer = el("div", { class: "spacer" });
  pane.appendChild(layer);
  inspector = el("div", { class: "inspector", id: "inspector", "aria-live": "polite" }, el("p", { class: "muted" }, "Hover or focus a token."));
  const banners = [];
  if (D.part_missing) banners.push(el("div", { class: "banner bad", role: "alert" }, "The Parquet part of this rollout is missing: the tokens below are the JSONL copy, not what the trainer reads."));
  if (D.part_error) banners.push(el("div", { class: "banner bad", role: "alert" }, "The Parquet part is unreadable (" + D.part_error + "): showing the JSONL copy."));
  if (!D.texts) banners.push(el("div", { class: "banner" }, "No tokenizer: tokens are shown as IDs."));
  const sampled = D.mask.reduce((a, b) => a + b, 0);
  T = D.trained && D.trained.loss_mask ? D.trained : null;
  if (D.trained && D.trained.error) banners.push(el("div", { class: "banner bad", role: "alert" }, "The rows-as-trained file of this batch is unusable: " + D.trained.error));
  if (D.trained && !T && !D.trained.error) banners.push(el("div", { class: "banner", id: "not-forwarded" }, D.trained.excluded ? "Not trained: the rollout was left out of GRPO (" + D.trained.excluded + ")." : "Not forwarded by the trainer: its advantage is " + fmt(D.trained.advantage) + " (a tied group's rows add nothing to the loss and are skipped)."));
  const stat = (k, v, id) => el("div", { class: "stat" }, el("div", { class: "k" }, k), el("div", { class: "v", id }, v));
  mainEl.replaceChildren(
    el("h1", {}, "Row ", el("span", { class: "mono" }, `${D.row}`), el("span", { class: "muted" }, ` of ${D.rows} · rollout `), link("/rollout", { id }, el("span", { class: "mono" }, id))),
    ...banners,
    el("section", { class: "card" }, el("div", { class: "stats" },
      stat("tokens", fmt(D.ids.length)), stat("sampled (loss mask 1)", fmt(sampled), "stat-sampled"),
      stat("prompt / context", fmt(D.ids.length - sampled)), stat("turns", fmt(D.turns.length)), stat("reward", SV.rewardCell(D.reward)),
      D.trained ? stat("advantage (trainer's)", SV.advCell(D.trained.advantage), "stat-advantage") : "",
      T ? stat("tokens trained", fmt(T.trained_tokens), "stat-trained") : "",
      T ? stat("clipped tokens", fmt(T.clipped_tokens), "stat-clipped") : "",
      T ? stat("first optimizer step", fmt(T.step), "stat-step") : ""),
      T ? el("label", { class: "shade" }, "shade sampled tokens by ", el("select", { id: "shade-by", "aria-label": "shade by", onchange: (e) => { mode = e.target.value; relayout(); render(); } },
        [["sampler", "sampler logprob"], ["trainer", "trainer logprob (first step)"], ["gap", "gap: trainer − sampler"], ["weight", "importance weight"], ["clipped", "clipped"], ["advantage", "advantage"], ["mask", "loss mask as trained"], ["version", "policy version"]].map(([v, l]) => el("option", { value: v }, l)))) : "",
      el("div", { class: "legend" }, "legend: ", tokSample("prompt", "p"), tokSample("sampled, p≈1", "s", 0), tokSample("sampled, p≈0.37", "s", -1), tokSample("sampled, p<0.01", "s", -5), tokSample("<|special|>", "p sp"),
        el("span", { class: "marker turn" }, "turn"), el("span", { class: "marker fork" }, "fork"), el("span", { class: "marker heal" }, "heal"), "  · = space, ↵ = newline, → = tab")),
    el("div", { class: "rowlayout" }, pane,
      el("aside", { class: "side" },
        el("section", { class: "card" }, el("h2", {}, "Token"), inspector),
        el("section", { class: "card" }, el("h2", {}, "Markers"), markerList()),
        T ? el("section", { class: "card" }, el("h2", {}, "Largest sampler↔trainer gaps"), gapList()) : "")),
  );
  layout();
  pane.addEventListener("scroll", render, { passive: true });
  window.addEventListener("resize", () => { layout(); });
  pane.addEventListener("mouseover", (e) => {
    const t = e.target.closest && e.target.closest(".tok");
    if (t) show(+t.dataset.i);
  });
  pane.addEventListener("click", (e) => {
    const t = e.target.closest && e.target.closest(".tok");
    if (t) setCur(+t.dataset.i, false);
  });
  pane.addEventListener("keydown", onKey);
  const pos = parseInt(p.get("pos") || "", 10);
  if (Number.isInteger(pos) && pos >= 0 && pos < D.ids.length) goTo(pos);
  document.body.dataset.ready = "1";
  performance.mark("row-interactive"); // read by bench/viewer.py
}

function tokSample(text, cls, lp) {
  const s = el("span", { class: "tok " + cls }, text);
  if (lp !== undefined) s.style.backgroundColor = shade(lp);
  return s;
}

function shade(lp) {
  const p = Math.exp(Math.max(-10, Math.min(0, lp)));
  const hue = Math.round(120 * Math.pow(p, 0.7)); // red (unlikely) .. green (certain)
  return `hsl(${hue}, 75%, ${88 - 10 * (1 - p)}%)`;
}

function gapList() {
  if (!T.gaps.length) return el("p", { class: "muted" }, "no trained token");
  return el("ol", { class: "marklist", id: "gaps" }, T.gaps.map((g) => el("li", {},
    el("button", { type: "button", "data-pos": g.pos, "data-gap": g.gap, onclick: () => goTo(g.pos) },
      `@${g.pos}  `, el("span", { class: "mono" }, `${g.gap > 0 ? "+" : ""}${g.gap.toFixed(4)}`), el("span", { class: "muted" }, `  trainer ${g.trainer.toFixed(4)} · sampler ${g.sampler.toFixed(4)}`)))));
}

// the background of sampled token i under the current "shade by" mode (null: none)
function colour(i) {
  if (!T || mode === "sampler") return D.mask[i] ? shade(D.logprobs[i]) : null;
  const on = T.loss_mask[i];
  if (mode === "mask") return on ? "hsl(140, 60%, 80%)" : null;
  if (!on) return null;
  const num = (x) => (typeof x === "number" ? x : NaN);
  if (mode === "trainer") return Number.isFinite(num(T.trainer_logprobs[i])) ? shade(T.trainer_logprobs[i]) : "#bbb";
  if (mode === "gap") {
    const g = num(T.trainer_logprobs[i]) - num(T.sampler_logprobs[i]);
    if (!Number.isFinite(g)) return "#bbb";
    return `hsl(${g >= 0 ? 215 : 0}, 80%, ${Math.round(97 - 45 * Math.min(1, Math.abs(g)))}%)`;
  }
  if (mode === "weight") {
    const w = num(T.importance_weight[i]);
    return `hsl(${w >= 1 ? 215 : 0}, 80%, ${Math.round(97 - 45 * Math.min(1, Math.abs(Math.log(w || 1e-9))))}%)`;
  }
  if (mode === "clipped") return T.clipped[i] ? "hsl(30, 95%, 60%)" : "hsl(0, 0%, 94%)";
  if (mode === "advantage") {
    const a = D.trained.advantage || 0;
    return `hsl(${a >= 0 ? 140 : 0}, 70%, ${Math.round(92 - 30 * Math.min(1, Math.abs(a)))}%)`;
  }
  if (mode === "version") {
    const s = spanOf(i);
    const v = s && typeof s.policy_version === "number" ? s.policy_version : null;
    return v === null ? "#ddd" : `hsl(${(v * 67) % 360}, 60%, 82%)`;
  }
  return null;
}

function markerList() {
  if (!D.markers.length) return el("p", { class: "muted" }, "none");
  return el("ul", { class: "marklist", id: "marklist" }, D.markers.map((m) => el("li", {},
    el("button", { type: "button", "data-kind": m.kind, "data-pos": m.pos, onclick: () => goTo(m.pos) },
      el("span", { class: "marker " + m.kind }, m.kind), ` @${m.pos}  `, el("span", { class: "muted" }, m.label)))));
}

function layout() {
  const probe = el("span", { class: "mono" }, "MMMMMMMMMM");
  probe.style.font = "13px/20px " + getComputedStyle(pane).fontFamily;
  probe.style.visibility = "hidden";
  document.body.appendChild(probe);
  const cw = probe.getBoundingClientRect().width / 10 || 7.8;
  probe.remove();
  const maxw = Math.max(40, Math.floor((pane.clientWidth - 80) / cw));
  lines = [0];
  lineOf = new Int32Array(D.ids.length);
  let w = 0;
  for (let i = 0; i < D.ids.length; i++) {
    const mk = markersAt.get(i);
    const tw = disp[i].length + (mk ? mk.reduce((a, m) => a + m.kind.length + 2, 0) : 0);
    if (w > 0 && w + tw > maxw) { lines.push(i); w = 0; }
    lineOf[i] = lines.length - 1;
    w += tw;
    if (disp[i].endsWith("↵") && i + 1 < D.ids.length) { lines.push(i + 1); w = 0; }
  }
  layer.style.height = lines.length * LINE_H + "px";
  relayout();
  render();
}

// render the lines on screen (plus OVERSCAN either side); lines already in the DOM are kept,
// so a small scroll adds and removes a few lines only
const shown = new Map(); // line index -> element
function render() {
  const first = Math.max(0, Math.floor(pane.scrollTop / LINE_H) - OVERSCAN);
  const last = Math.min(lines.length - 1, Math.ceil((pane.scrollTop + pane.clientHeight) / LINE_H) + OVERSCAN);
  for (const [l, node] of shown) {
    if (l < first || l > last) {
      node.remove();
      shown.delete(l);
    }
  }
  const frag = document.createDocumentFragment();
  for (let l = first; l <= last; l++) {
    if (!shown.has(l)) {
      const node = lineNode(l);
      shown.set(l, node);
      frag.appendChild(node);
    }
  }
  layer.appendChild(frag);
}

function lineNode(l) {
  const start = lines[l], end = l + 1 < lines.length ? lines[l + 1] : D.ids.length;
  const ln = el("div", { class: "ln" }, el("span", { class: "no", "aria-hidden": "true" }, String(start)));
  ln.style.top = l * LINE_H + "px";
  for (let i = start; i < end; i++) {
    for (const m of markersAt.get(i) || []) {
      ln.appendChild(el("span", { class: "marker " + m.kind, "data-kind": m.kind, "data-pos": m.pos, title: m.label }, m.kind));
    }
    const s = el("span", { class: "tok " + (D.mask[i] ? "s" : "p") + (D.isSpecial[i] ? " sp" : "") + (i === cur ? " cur" : ""), "data-i": i }, disp[i]);
    const c = colour(i);
    if (c) s.style.backgroundColor = c;
    ln.appendChild(s);
  }
  return ln;
}

function relayout() {
  for (const node of shown.values()) node.remove();
  shown.clear();
}

function spanOf(i) {
  return D.turns.find((s) => s.start <= i && i < s.end) || null;
}

function show(i) {
  const t = D.ids[i];
  const text = D.texts ? D.texts[String(t)] : null;
  const span = spanOf(i);
  const next = D.turns.find((s) => s.start > i);
  const lp = D.logprobs[i];
  const rows = [
    ["index", String(i)], ["token id", String(t)],
    ["kind", D.mask[i] ? "sampled (loss mask 1, trained)" : "prompt / context (loss mask 0)"],
    ["logprob", D.mask[i] ? `${lp.toFixed(4)}  (p = ${Math.exp(lp).toFixed(4)})` : "–"],
    ["turn", span ? String(span.turn) : next ? `context before turn ${next.turn}` : "context"],
    ["policy version", span && span.policy_version !== null && span.policy_version !== undefined ? "v" + span.policy_version : "–"],
  ];
  if (T) {
    const f4 = (x) => (typeof x === "number" ? x.toFixed(4) : String(x));
    const on = T.loss_mask[i];
    rows.push(["trained", on ? "yes (loss mask 1 as trained)" : D.mask[i] ? "no (filtered by the trainer's top-k/top-p)" : "no"]);
    if (on) {
      rows.push(["trainer logprob", f4(T.trainer_logprobs[i])], ["sampler logprob", f4(T.sampler_logprobs[i])],
        ["gap (trainer − sampler)", typeof T.trainer_logprobs[i] === "number" ? (T.trainer_logprobs[i] - T.sampler_logprobs[i]).toFixed(4) : "–"],
        ["ratio denominator", f4(T.old_logprobs[i])], ["importance weight", f4(T.importance_weight[i])], ["clipped", T.clipped[i] ? "yes" : "no"],
        ["advantage", f4(D.trained.advantage)]);
    }
  }
  inspector.replaceChildren(
    el("div", { class: "big", id: "insp-text" }, text === null || text === undefined ? "(not decoded)" : JSON.stringify(text)),
    el("table", { class: "kv", id: "insp-table" }, rows.map(([k, v]) => el("tr", { "data-k": k }, el("td", {}, k), el("td", { class: "mono" }, v)))),
    ...(markersAt.get(i) || []).map((m) => el("div", { class: "banner" }, m.label)),
  );
}

function setCur(i, scroll) {
  layer.querySelector(".tok.cur")?.classList.remove("cur");
  cur = Math.max(0, Math.min(D.ids.length - 1, i));
  if (scroll) {
    const top = lineOf[cur] * LINE_H;
    if (top < pane.scrollTop || top > pane.scrollTop + pane.clientHeight - 2 * LINE_H) pane.scrollTop = Math.max(0, top - pane.clientHeight / 3);
  }
  render();
  layer.querySelector(`.tok[data-i="${cur}"]`)?.classList.add("cur");
  show(cur);
}

function goTo(pos) {
  setCur(pos, true);
  pane.focus({ preventScroll: true });
}

function onKey(e) {
  if (cur < 0) cur = lines[Math.floor(pane.scrollTop / LINE_H)] || 0;
  const l = lineOf[cur];
  const col = cur - lines[l];
  const atLine = (k) => {
    const ln = Math.max(0, Math.min(lines.length - 1, k));
    const end = ln + 1 < lines.length ? lines[ln + 1] - 1 : D.ids.length - 1;
    return Math.min(lines[ln] + col, end);
  };
  const page = Math.max(1, Math.floor(pane.clientHeight / LINE_H) - 2);
  const keys = {
    ArrowRight: () => cur + 1, ArrowLeft: () => cur - 1, ArrowDown: () => atLine(l + 1), ArrowUp: () => atLine(l - 1),
    PageDown: () => atLine(l + page), PageUp: () => atLine(l - page), Home: () => 0, End: () => D.ids.length - 1,
    n: () => (D.markers.find((m) => m.pos > cur) || { pos: cur }).pos,
    p: () => ([...D.markers].reverse().find((m) => m.pos < cur) || { pos: cur }).pos,
  };
  if (keys[e.key]) {
    e.preventDefault();
    setCur(keys[e.key](), true);
  }
}

SV.start(main);
