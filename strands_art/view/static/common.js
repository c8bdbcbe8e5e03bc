// strands-art view: helpers shared by the four pages.
// Every piece of run data reaches the page through textContent (el() below), never as HTML:
// a tool result holding <script>, an <img onerror>, a javascript: URL or ANSI escapes shows as
// characters. Links are built only from our own paths with encodeURIComponent'ed ids.
"use strict";

const SV = {};

// el("div", {class: "x", title: "t"}, child, "text", ...): children are nodes or strings (as text).
SV.el = function (tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "onclick" || k === "onchange" || k === "oninput" || k === "onkeydown") node[k] = v;
    else node.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    node.appendChild(typeof c === "object" && c.nodeType ? c : document.createTextNode(SV.controls(String(c))));
  }
  return node;
};

// which run of `strands-art view RUN_A RUN_B ...` this page shows (?run=K; none: the first),
// carried by every API call and page link
SV.run = new URLSearchParams(location.search).get("run");
SV.withRun = function (params) {
  return SV.run && !("run" in params) ? { ...params, run: SV.run } : params;
};

// a link to one of our pages: path is a constant, params are encoded
SV.link = function (page, params, ...children) {
  const q = new URLSearchParams(SV.withRun(params)).toString();
  return SV.el("a", { href: page + (q ? "?" + q : "") }, ...children);
};

SV.api = async function (path) {
  if (SV.run && path.startsWith("/api/") && !/[?&]run=/.test(path)) path += (path.includes("?") ? "&" : "?") + "run=" + encodeURIComponent(SV.run);
  const r = await fetch(path, { headers: { Accept: "application/json" } });
  let body;
  try { body = await r.json(); } catch (e) { body = { error: "HTTP " + r.status + ": not JSON" }; }
  if (!r.ok) throw new Error(body.error || "HTTP " + r.status);
  return body;
};

SV.params = () => new URLSearchParams(location.search);

// a clipped field from the API: a string, or {truncated, head, size}
SV.textOf = function (v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "object" && v.truncated) return v.head;
  return typeof v === "string" ? v : JSON.stringify(v);
};
SV.truncNote = function (v) {
  if (v && typeof v === "object" && v.truncated) {
    return SV.el("div", { class: "trunc" }, `truncated: showing ${v.head.length.toLocaleString()} of ${v.size.toLocaleString()} characters`);
  }
  return null;
};
// control characters (ANSI escapes) and bidi overrides (U+202E and kin, which would reorder what
// follows them on screen) shown as escapes; idempotent, so applied to every text node (SV.el)
SV.controls = function (s) {
  return s
    .replace(/[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/g, (c) => "\\x" + c.charCodeAt(0).toString(16).padStart(2, "0"))
    .replace(/[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
};
// pre block for a possibly clipped text
SV.pre = function (v, cls) {
  return [SV.el("pre", { class: "text " + (cls || "") }, SV.controls(SV.textOf(v))), SV.truncNote(v)];
};

SV.fmt = function (x, digits) {
  if (x === null || x === undefined || x === "") return "–";
  if (typeof x === "number") {
    if (Math.abs(x) >= 1e15) return x.toPrecision(4);  // 1e308 as "1.000e+308", not 309 digits
    if (Number.isInteger(x)) return x.toLocaleString();
    return x.toFixed(digits === undefined ? 3 : digits);
  }
  return String(x);
};
SV.rewardCell = function (r) {
  const cls = typeof r !== "number" ? "" : r >= 1 ? "r1" : r <= 0 ? "r0" : "rmid";
  return SV.el("span", { class: "reward " + cls }, typeof r === "number" ? r.toFixed(2) : SV.fmt(r));
};
SV.advCell = function (a) {
  if (typeof a !== "number") return SV.el("span", { class: "adv muted" }, "–");
  const s = (a > 0 ? "+" : "") + a.toFixed(3);
  return SV.el("span", { class: "adv " + (a > 0 ? "pos" : a < 0 ? "neg" : ""), title: "GRPO advantage within its group" }, s);
};
SV.eventChips = function (events) {
  return Object.entries(events || {}).map(([k, n]) => SV.el("span", { class: "chip " + k }, `${k} ×${n}`));
};

SV.header = function (crumbs) {
  const nav = SV.el("nav", {});
  crumbs.filter((c) => c).forEach((c, i) => {
    if (i) nav.appendChild(SV.el("span", { class: "sep" }, "›"));
    nav.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
  });
  const live = SV.el("span", { class: "live", id: "live-state" }, "");
  document.body.prepend(SV.el("header", { class: "top" }, SV.el("span", { class: "brand" }, "strands-art view"), nav, live));
};

SV.fail = function (where, err) {
  where.replaceChildren(SV.el("div", { class: "banner bad", role: "alert" }, "Could not load: " + err.message));
};

// whitespace made visible for the token view
SV.visible = function (s) {
  return SV.controls(s.replace(/ /g, "·").replace(/\n/g, "↵").replace(/\t/g, "→").replace(/\r/g, "␍"));
};

// simple SVG charts, built with createElementNS (no HTML strings)
SV.svg = function (tag, attrs, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  for (const c of children) node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
  return node;
};

// line chart: series = [{name, points: [[x, y]], cls}]
SV.lineChart = function (series, opts) {
  const W = 320, H = 170, L = 44, R = 10, T = 10, B = 26;
  const pts = series.flatMap((s) => s.points);
  const svg = SV.svg("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": opts.title });
  if (!pts.length) {
    svg.appendChild(SV.svg("text", { x: W / 2 - 30, y: H / 2 }, "no data"));
    return svg;
  }
  let [x0, x1] = [Math.min(...pts.map((p) => p[0])), Math.max(...pts.map((p) => p[0]))];
  let [y0, y1] = [Math.min(...pts.map((p) => p[1])), Math.max(...pts.map((p) => p[1]))];
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  if (y0 === y1) { const pad = Math.abs(y0) * 0.1 || 0.5; y0 -= pad; y1 += pad; }
  const X = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const Y = (y) => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
  svg.appendChild(SV.svg("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  svg.appendChild(SV.svg("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  for (const y of [y0, (y0 + y1) / 2, y1]) {
    svg.appendChild(SV.svg("text", { x: 2, y: Y(y) + 4 }, SV.short(y)));
  }
  svg.appendChild(SV.svg("text", { x: L, y: H - 8 }, String(x0)));
  svg.appendChild(SV.svg("text", { x: W - R - 20, y: H - 8 }, String(x1)));
  svg.appendChild(SV.svg("text", { x: (W - 60) / 2, y: H - 8 }, opts.xlabel || ""));
  for (const s of series) {
    if (!s.points.length) continue;
    const d = s.points.map((p, i) => (i ? "L" : "M") + X(p[0]).toFixed(1) + " " + Y(p[1]).toFixed(1)).join(" ");
    svg.appendChild(SV.svg("path", { class: s.cls || "series", d }));
    for (const p of s.points) {
      const c = SV.svg("circle", { class: "dot", cx: X(p[0]), cy: Y(p[1]), r: 2.5 });
      c.appendChild(SV.svg("title", {}, `${s.name}: batch ${p[0]}: ${p[1]}`));
      svg.appendChild(c);
    }
  }
  return svg;
};

SV.short = function (y) {
  const a = Math.abs(y);
  if (a !== 0 && (a < 1e-3 || a >= 1e5)) return y.toExponential(1);
  return (+y.toPrecision(3)).toString();
};

// bar chart of [[label, count], ...] (in that order)
SV.barChart = function (pairs, title) {
  const counts = Object.fromEntries(pairs.map(([k, v]) => ["\u200b" + k, v]));
  const W = 420, H = 150, L = 30, B = 24, T = 20;
  const labels = Object.keys(counts);
  const max = Math.max(1, ...Object.values(counts));
  const svg = SV.svg("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": title });
  const bw = labels.length ? (W - L - 10) / labels.length : 0;
  labels.forEach((lab, i) => {
    const h = (counts[lab] / max) * (H - B - T);
    const x = L + i * bw + bw * 0.15;
    const r = SV.svg("rect", { class: "barrect", x, y: H - B - h, width: bw * 0.7, height: h });
    r.appendChild(SV.svg("title", {}, `reward ${lab.slice(1)}: ${counts[lab]} rollouts`));
    svg.appendChild(r);
    svg.appendChild(SV.svg("text", { x: x + bw * 0.35 - 8, y: H - 8 }, lab.slice(1)));
    svg.appendChild(SV.svg("text", { x: x + bw * 0.35 - 6, y: H - B - h - 3 }, String(counts[lab])));
  });
  svg.appendChild(SV.svg("line", { class: "axis", x1: L, y1: H - B, x2: W - 5, y2: H - B }));
  return svg;
};

// run a page's main once the document is parsed (page scripts are loaded after it)
SV.start = function (main) {
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", main);
  else main();
};

// the one HTML shell (page.html) serves the four pages: load the script of this one
(function () {
  const script = { "/": "run.js", "/rollout": "rollout.js", "/row": "row.js", "/compare": "compare.js" }[location.pathname];
  if (script) document.head.appendChild(SV.el("script", { src: "/static/" + script }));
})();
